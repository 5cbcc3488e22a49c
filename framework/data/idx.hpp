// IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed, and the
// image-classification dataset built from them.
#pragma once

#include <cstdint>
#include <filesystem>
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

// Where Debian's dataset-fashion-mnist package puts the files.
std::filesystem::path fashion_mnist_dir();

}  // namespace levers::data
