// The checkpoint file: versioned, self-describing, checksummed, written
// atomically.
//
// Layout: the 8 bytes "LEVERSCK", a u32 format version, a u64 header length,
// the header (JSON: the caller's metadata and a table of tensors with name,
// dtype, shape, offset, byte count and CRC-32), the header's CRC-32, then
// each tensor's bytes at its 64-byte-aligned offset. Integers are little-endian.
// Reading checks every length and checksum and executes nothing from the file.
#pragma once

#include "levers/core/tensor.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace levers {

struct NamedTensor {
    std::string name;
    Tensor tensor;  // contiguous; written from wherever it lives, read onto the CPU
};

struct Checkpoint {
    nlohmann::json metadata;
    std::vector<NamedTensor> tensors;

    // The tensor called `name`; throws levers::Error listing what the file holds.
    const Tensor& at(const std::string& name) const;
};

inline constexpr std::uint32_t kCheckpointVersion = 1;

// Writes `path` atomically: a temporary file beside it, fsync, rename, fsync
// of the directory. A crash at any moment leaves the previous file intact.
void write_checkpoint(const std::filesystem::path& path, const nlohmann::json& metadata,
                      const std::vector<NamedTensor>& tensors);

// Reads and verifies `path`; a missing, truncated, corrupted or other-version
// file is refused with a levers::Error naming the file and the fault.
Checkpoint read_checkpoint(const std::filesystem::path& path);

// The metadata alone, from the header (the tensors neither read nor checked):
// a look at a checkpoint before loading it. Refuses what read_checkpoint
// refuses in the header.
nlohmann::json read_checkpoint_metadata(const std::filesystem::path& path);

}  // namespace levers
