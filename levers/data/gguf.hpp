// GGUF, the file llama.cpp, Ollama and LM Studio load (version 3, little-
// endian): "GGUF", the version, the tensor and key counts, the metadata as
// typed key/value pairs, the tensor table (name, dimensions innermost first,
// ggml type, offset into the data), then the tensors' data, each at a
// multiple of general.alignment (32 unless the file says otherwise).
//
// Writing streams: the table is declared first, so every offset is known
// before any data is written, and each tensor is then written once, in
// table order, without the whole model in memory. The file is written under
// a temporary name beside its place and renamed there when complete.
#pragma once

#include "levers/data/ggml_quants.hpp"
#include "levers/data/mapped_file.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

namespace levers::data {

// A metadata value. Integers of every width are held as 64-bit, with the
// type they are stored as; arrays hold strings, integers or reals.
struct GgufValue {
    enum class Type : std::uint32_t {
        u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
        string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
    };
    Type type = Type::u32;
    Type element = Type::u32;  // an array's elements
    std::variant<std::int64_t, double, std::string, std::vector<std::string>, std::vector<std::int64_t>,
                 std::vector<double>>
        value;

    static GgufValue u32(std::uint32_t v) { return {Type::u32, Type::u32, static_cast<std::int64_t>(v)}; }
    static GgufValue i32(std::int32_t v) { return {Type::i32, Type::i32, static_cast<std::int64_t>(v)}; }
    static GgufValue f32(double v) { return {Type::f32, Type::f32, v}; }
    static GgufValue boolean(bool v) { return {Type::boolean, Type::boolean, static_cast<std::int64_t>(v)}; }
    static GgufValue string(std::string v) { return {Type::string, Type::string, std::move(v)}; }
    static GgufValue strings(std::vector<std::string> v) { return {Type::array, Type::string, std::move(v)}; }
    static GgufValue i32s(std::vector<std::int64_t> v) { return {Type::array, Type::i32, std::move(v)}; }
    static GgufValue f32s(std::vector<double> v) { return {Type::array, Type::f32, std::move(v)}; }

    // Typed reads; each throws levers::Error naming `key` when the value is not of that kind.
    std::int64_t as_int(const std::string& key) const;
    double as_real(const std::string& key) const;  // integers too
    const std::string& as_string(const std::string& key) const;
    const std::vector<std::string>& as_strings(const std::string& key) const;
    // The value as one line for people: arrays shortened to their length and first items.
    std::string summary() const;
};

struct GgufTensorInfo {
    std::string name;
    std::vector<std::int64_t> dims;  // innermost (a row's length) first, as ggml's ne
    GgmlType type = GgmlType::f32;
    std::uint64_t offset = 0;  // from the start of the data section
    std::int64_t numel() const;
    std::int64_t rows() const { return numel() / (dims.empty() ? 1 : dims[0]); }
    std::size_t bytes() const;  // throws for a type levers does not know
};

class GgufWriter {
public:
    // Nothing is written until begin_data(); an unfinished writer removes its temporary file.
    explicit GgufWriter(std::filesystem::path path, std::uint32_t alignment = 32);
    ~GgufWriter();
    GgufWriter(const GgufWriter&) = delete;
    GgufWriter& operator=(const GgufWriter&) = delete;

    void set(const std::string& key, GgufValue value);  // in the order given; a key set twice keeps its first place
    void add_tensor(const std::string& name, std::vector<std::int64_t> dims, GgmlType type);
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    // Writes the header, metadata and table to the temporary file.
    void begin_data();
    // The next bytes of the tensors' data, in table order; a tensor's data
    // may come in parts (rows at a time), but exactly its bytes() in all.
    void write_tensor(const std::byte* data, std::size_t bytes);
    // Flushes, checks every tensor was written, and renames the file into place. Returns its size.
    std::uint64_t finish();

private:
    std::filesystem::path path_, temporary_;
    std::uint32_t alignment_;
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::vector<GgufTensorInfo> tensors_;
    std::ofstream out_;
    std::uint64_t data_start_ = 0, written_ = 0;
    std::size_t next_ = 0, part_ = 0;  // the tensor being written, and its bytes so far
    bool finished_ = false;
};

class GgufFile {
public:
    // Maps the file and reads its header, metadata and table; every length,
    // type and range is checked (a truncated file or a tensor past the end
    // is an error naming the file and the field).
    static GgufFile open(const std::filesystem::path& path);

    std::uint32_t version() const { return version_; }
    std::uint32_t alignment() const { return alignment_; }
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
    const GgufValue* find(const std::string& key) const;
    const GgufValue& at(const std::string& key) const;  // throws naming the key and the file
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* tensor(const std::string& name) const;
    const std::byte* data(const GgufTensorInfo& info) const { return base_ + data_start_ + info.offset; }
    // A tensor's values as f32 (rows dequantized).
    std::vector<float> read_f32(const GgufTensorInfo& info) const;
    const std::filesystem::path& path() const { return path_; }
    std::uint64_t size() const { return file_.size(); }

private:
    MappedFile file_;
    std::filesystem::path path_;
    const std::byte* base_ = nullptr;
    std::uint32_t version_ = 0, alignment_ = 32;
    std::uint64_t data_start_ = 0;
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::vector<GgufTensorInfo> tensors_;
};

}  // namespace levers::data
