// The safetensors format (Hugging Face): an 8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and byte range, then the
// bytes. Reading maps the file, checks every length and range and executes
// nothing; F64, F32, F16 and BF16 tensors are read (as f32 values, or F64's
// as they are with to_f64), U8 ones as bytes (to_u8).
#pragma once

#include "levers/core/tensor.hpp"
#include "levers/data/mapped_file.hpp"

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace levers::data {

// One tensor of a file, as stored: its bytes stay in the mapping.
struct StoredTensor {
    std::string dtype;  // "F64", "F32", "F16", "BF16", or "U8" (bytes: packed 4-bit codes and their state)
    Shape shape;
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    // Its values as f32 into `out` (shape().numel() floats).
    void read_f32(float* out) const;
    // The same as a new f32 tensor on the host.
    Tensor to_f32() const;
    // Its values as a new f64 tensor on the host (F64's exactly).
    Tensor to_f64() const;
    // A U8 tensor's bytes as a new u8 tensor on the host.
    Tensor to_u8() const;
};

// A safetensors file, memory-mapped: the page cache holds it once for every
// rank of a node, and a tensor is converted only when it is read.
class SafeTensorsFile {
public:
    // Throws levers::Error naming the file and the fault (truncated, a range
    // past the end, an unsupported dtype, ...).
    static SafeTensorsFile open(const std::filesystem::path& path);
    const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::filesystem::path& path() const { return path_; }

private:
    MappedFile file_;
    std::filesystem::path path_;
    std::map<std::string, StoredTensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

struct SafeTensors {
    std::map<std::string, Tensor> tensors;         // f32, by name
    std::map<std::string, std::string> metadata;   // the header's "__metadata__"
};

// Every tensor of a file read into f32 host tensors (errors as SafeTensorsFile::open).
SafeTensors read_safetensors(const std::filesystem::path& path);

// Writes dense f32 or f64 host tensors (in the order given) atomically,
// stored as `dtype`: "F64", "F32", "BF16" or "F16" (rounded to nearest even);
// those named in `kept_f32` as F32 whatever `dtype` (4-bit weights' scales),
// and u8 tensors as U8.
void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {}, const std::string& dtype = "F32",
                       const std::set<std::string>& kept_f32 = {});

// The bytes a tensor of `numel` elements takes stored as `dtype` (F64, F32, BF16, F16).
std::size_t stored_bytes(std::int64_t numel, const std::string& dtype);

}  // namespace levers::data
