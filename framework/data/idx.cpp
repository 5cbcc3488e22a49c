#include "framework/data/idx.hpp"

#include "framework/core/error.hpp"

#include <zlib.h>

#include <cstdlib>
#include <memory>

namespace levers::data {

namespace {

// gzread reads compressed and plain files alike.
struct GzFile {
    gzFile f;
    explicit GzFile(const std::filesystem::path& p) : f(gzopen(p.c_str(), "rb")) {}
    ~GzFile() {
        if (f) gzclose(f);
    }
    std::size_t read(void* out, std::size_t n) {
        int got = gzread(f, out, static_cast<unsigned>(n));
        return got < 0 ? 0 : static_cast<std::size_t>(got);
    }
};

}  // namespace

IdxArray read_idx(const std::filesystem::path& path, int expected_dims) {
    std::error_code ec;
    LEVERS_CHECK(std::filesystem::is_regular_file(path, ec),
                 "{}: no such file (on Debian: apt-get install dataset-fashion-mnist)", path.string());
    GzFile in(path);
    LEVERS_CHECK(in.f != nullptr, "{}: cannot be opened", path.string());
    unsigned char magic[4] = {};
    LEVERS_CHECK(in.read(magic, 4) == 4, "{}: shorter than an IDX header", path.string());
    const unsigned expected_magic = 0x0800u + static_cast<unsigned>(expected_dims);
    const unsigned got_magic = (unsigned{magic[0]} << 24) | (unsigned{magic[1]} << 16) | (unsigned{magic[2]} << 8) |
                               unsigned{magic[3]};
    LEVERS_CHECK(got_magic == expected_magic,
                 "{}: bad IDX magic number 0x{:08x}, expected 0x{:08x} (unsigned bytes, {} dimensions)", path.string(),
                 got_magic, expected_magic, expected_dims);
    IdxArray out;
    std::int64_t total = 1;
    for (int d = 0; d < expected_dims; ++d) {
        unsigned char b[4];
        LEVERS_CHECK(in.read(b, 4) == 4, "{}: header ends before dimension {}", path.string(), d);
        std::int64_t size = (std::int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
        LEVERS_CHECK(size > 0 && size < (1 << 28), "{}: implausible dimension {} = {}", path.string(), d, size);
        out.dims.push_back(size);
        total *= size;
    }
    LEVERS_CHECK(total < (std::int64_t{1} << 32), "{}: header promises {} values, too many", path.string(), total);
    out.values.resize(static_cast<std::size_t>(total));
    std::size_t got = in.read(out.values.data(), out.values.size());
    LEVERS_CHECK(got == out.values.size(), "{}: truncated: the header promises {} bytes of data, the file has {}",
                 path.string(), total, got);
    unsigned char extra;
    LEVERS_CHECK(in.read(&extra, 1) == 0, "{}: has bytes after the {} the header promises", path.string(), total);
    return out;
}

ImageDataset load_idx_dataset(const std::filesystem::path& images, const std::filesystem::path& labels, int classes) {
    IdxArray img = read_idx(images, 3), lab = read_idx(labels, 1);
    LEVERS_CHECK(img.dims[0] == lab.dims[0], "{} holds {} images but {} holds {} labels", images.string(), img.dims[0],
                 labels.string(), lab.dims[0]);
    ImageDataset ds;
    ds.count = img.dims[0];
    ds.pixels = img.dims[1] * img.dims[2];
    ds.classes = classes;
    ds.images.resize(img.values.size());
    // Scale to [0, 1] and centre: 0.5 is close enough to the pixel mean for
    // well-conditioned training and keeps the transform independent of the data.
    for (std::size_t i = 0; i < img.values.size(); ++i) ds.images[i] = static_cast<float>(img.values[i]) / 255.0f - 0.5f;
    ds.labels.resize(lab.values.size());
    for (std::size_t i = 0; i < lab.values.size(); ++i) {
        LEVERS_CHECK(lab.values[i] < classes, "{}: label {} at index {} is not below {} classes", labels.string(),
                     int{lab.values[i]}, i, classes);
        ds.labels[i] = lab.values[i];
    }
    return ds;
}

ImageDataset ImageDataset::slice(std::int64_t begin, std::int64_t end) const {
    LEVERS_CHECK(0 <= begin && begin <= end && end <= count, "dataset slice [{}, {}) outside [0, {})", begin, end,
                 count);
    ImageDataset out;
    out.count = end - begin;
    out.pixels = pixels;
    out.classes = classes;
    out.images.assign(images.begin() + begin * pixels, images.begin() + end * pixels);
    out.labels.assign(labels.begin() + begin, labels.begin() + end);
    return out;
}

std::filesystem::path fashion_mnist_dir() {
    if (const char* d = std::getenv("LEVERS_FASHION_MNIST"); d && *d) return d;
    return "/usr/share/datasets/fashion-mnist";
}

}  // namespace levers::data
