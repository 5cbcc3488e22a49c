// Data files as a node holds them once: read-only memory maps (the page
// cache keeps one copy for every rank of the node), and files derived from
// data (a decompressed IDX file, a tokenised corpus) made once per node in a
// cache directory and mapped by every rank.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace levers::data {

class MappedFile {
public:
    // Maps `path` read-only; throws levers::Error naming it if it cannot.
    static MappedFile open(const std::filesystem::path& path);
    const std::byte* data() const { return data_.get(); }
    std::size_t size() const { return size_; }
    // Keeps the mapping alive for as long as the returned pointer lives.
    const std::shared_ptr<const std::byte>& memory() const { return data_; }

private:
    std::shared_ptr<const std::byte> data_;
    std::size_t size_ = 0;
};

// Drops the pages of [data, data + bytes) in a file mapping from this
// process's memory once read (the page cache keeps them; reading them again
// maps them again): a pass over a large mapped file keeps only what it
// works on resident. Only whole pages inside the range are dropped.
void release_pages(const std::byte* data, std::size_t bytes);

// $LEVERS_CACHE if set, else $XDG_CACHE_HOME/levers, else ~/.cache/levers.
std::filesystem::path cache_dir();

// The cache file for `key` (a name that changes whenever its inputs do),
// made by `make(path)` if it is not there yet: written to a temporary file,
// then renamed into place, under a lock, so the ranks of a node make it once
// and never see half of it.
std::filesystem::path cached_file(const std::string& key,
                                  const std::function<void(const std::filesystem::path&)>& make);

// A key part that changes with a source file: its path, size and modification time.
std::string file_signature(const std::filesystem::path& path);

}  // namespace levers::data
