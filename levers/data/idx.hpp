// IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed, and the
// image-classification dataset built from them.
#pragma once

#include "levers/core/tensor.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace levers::data {

struct IdxArray {
    std::vector<std::int64_t> dims;
    std::vector<std::uint8_t> values;  // row-major
};

// Reads an unsigned-byte IDX file with `expected_dims` dimensions (3 for
// images, 1 for labels). Throws levers::Error naming the file on a missing
// file, a bad magic number, or fewer/more bytes than the header promises.
IdxArray read_idx(const std::filesystem::path& path, int expected_dims);

struct ImageDataset {
    std::vector<float> images;  // [count, pixels], scaled to [0, 1] then centred
    std::vector<std::int32_t> labels;
    std::int64_t count = 0, pixels = 0;
    int classes = 0;

    // Rows [begin, end) as a new dataset.
    ImageDataset slice(std::int64_t begin, std::int64_t end) const;
};

// Images and labels from a pair of IDX files; checks that counts agree and
// labels are below `classes`.
ImageDataset load_idx_dataset(const std::filesystem::path& images, const std::filesystem::path& labels, int classes);

// Images and labels as a node holds them once: the IDX files decompressed
// into the data cache (mapped_file.hpp) and mapped, bytes as stored; batches
// are converted to floats as they are taken. Slices share the mapping.
class ImageSet {
public:
    std::int64_t count() const { return count_; }
    std::int64_t pixels() const { return pixels_; }
    int classes() const { return classes_; }
    std::int32_t label(std::int64_t i) const { return labels_[i]; }
    // Items [begin, end) as a set of their own, sharing the memory.
    ImageSet slice(std::int64_t begin, std::int64_t end) const;
    // The images `rows` (indices into this set) as f32 [n, pixels], scaled to
    // [0, 1] and centred (x / 255 - 0.5), and their labels as i32 [n]; host tensors.
    void gather(const std::vector<std::int64_t>& rows, Tensor& x, Tensor& y) const;
    // The same for the consecutive rows [first, first + n).
    void gather_range(std::int64_t first, std::int64_t n, Tensor& x, Tensor& y) const;

private:
    friend ImageSet map_idx_images(const std::filesystem::path&, const std::filesystem::path&, int);
    std::shared_ptr<const std::byte> image_file_, label_file_;  // keep the mappings
    const std::uint8_t* images_ = nullptr;
    const std::uint8_t* labels_ = nullptr;
    std::int64_t count_ = 0, pixels_ = 0;
    int classes_ = 0;
};

// The ImageSet of a pair of IDX files (plain or gzip-compressed), decompressed
// once per node into the cache; the same checks as load_idx_dataset.
ImageSet map_idx_images(const std::filesystem::path& images, const std::filesystem::path& labels, int classes);

// Where Debian's dataset-fashion-mnist package puts the files.
std::filesystem::path fashion_mnist_dir();

}  // namespace levers::data
