#include "levers/core/error.hpp"
#include "levers/data/idx.hpp"
#include "tests/temp_dir.hpp"
#include "tests/installed_data.hpp"

#include <doctest/doctest.h>

using namespace levers;

namespace {
std::string be32(unsigned v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
}  // namespace

TEST_CASE("Fashion-MNIST loads from Debian's package: 60000 + 10000 images of 28x28, 10 classes" *
          testing::needs({testing::Data::fashion_mnist})) {
    auto dir = data::fashion_mnist_dir();
    auto test = data::load_idx_dataset(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", 10);
    CHECK(test.count == 10000);
    CHECK(test.pixels == 784);
    std::vector<int> per_class(10);
    for (auto l : test.labels) per_class[static_cast<std::size_t>(l)]++;
    for (int c : per_class) CHECK(c == 1000);  // the test set is balanced
    auto labels = data::read_idx(dir / "train-labels-idx1-ubyte.gz", 1);
    CHECK(labels.dims == std::vector<std::int64_t>{60000});
}

TEST_CASE("IDX files that are missing, of the wrong kind, truncated or mismatched are refused by name") {
    testing::TempDir dir;
    auto images = dir.write("img.idx", be32(0x803) + be32(2) + be32(2) + be32(2) + std::string(8, '\x10'));
    auto labels = dir.write("lab.idx", be32(0x801) + be32(2) + std::string("\x01\x09", 2));
    auto ok = data::load_idx_dataset(images, labels, 10);
    CHECK(ok.count == 2);
    CHECK(ok.labels == std::vector<std::int32_t>{1, 9});

    CHECK_THROWS_WITH_AS(data::read_idx(dir.path() / "none.idx", 3), doctest::Contains("none.idx: no such file"), Error);
    CHECK_THROWS_WITH_AS(data::read_idx(labels, 3),
                         doctest::Contains("lab.idx: bad IDX magic number 0x00000801, expected 0x00000803"), Error);
    auto truncated = dir.write("short.idx", be32(0x803) + be32(2) + be32(2) + be32(2) + std::string(5, '\0'));
    CHECK_THROWS_WITH_AS(data::read_idx(truncated, 3),
                         doctest::Contains("short.idx: truncated: the header promises 8 bytes of data, the file has 5"),
                         Error);
    auto three = dir.write("three.idx", be32(0x801) + be32(3) + std::string("\x01\x02\x03", 3));
    CHECK_THROWS_WITH_AS(data::load_idx_dataset(images, three, 10), doctest::Contains("holds 2 images but"), Error);
    auto bad_label = dir.write("bad.idx", be32(0x801) + be32(2) + std::string("\x01\x0c", 2));
    CHECK_THROWS_WITH_AS(data::load_idx_dataset(images, bad_label, 10),
                         doctest::Contains("label 12 at index 1 is not below 10 classes"), Error);
}
