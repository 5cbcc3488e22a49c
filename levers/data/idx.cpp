#include "levers/data/idx.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/data/mapped_file.hpp"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <functional>
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

namespace {
// An IDX file decompressed into the cache: the header (magic, dimensions) then the bytes.
std::filesystem::path cached_idx(const std::filesystem::path& path, int dims) {
    return cached_file(fmt::format("idx-{:016x}.idx", std::hash<std::string>{}(file_signature(path))),
                       [&](const std::filesystem::path& out) {
                           const IdxArray a = read_idx(path, dims);  // checks it on the way
                           std::ofstream f(out, std::ios::binary);
                           const unsigned char magic[4] = {0, 0, 8, static_cast<unsigned char>(dims)};
                           f.write(reinterpret_cast<const char*>(magic), 4);
                           for (std::int64_t d : a.dims) {
                               const unsigned char b[4] = {static_cast<unsigned char>(d >> 24),
                                                           static_cast<unsigned char>(d >> 16),
                                                           static_cast<unsigned char>(d >> 8),
                                                           static_cast<unsigned char>(d)};
                               f.write(reinterpret_cast<const char*>(b), 4);
                           }
                           f.write(reinterpret_cast<const char*>(a.values.data()),
                                   static_cast<std::streamsize>(a.values.size()));
                           LEVERS_CHECK(f.good(), "{}: cannot be written", out.string());
                       });
}

std::int64_t dim_at(const std::byte* header, int d) {
    const auto* b = reinterpret_cast<const unsigned char*>(header) + 4 + 4 * d;
    return (std::int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
}
}  // namespace

ImageSet map_idx_images(const std::filesystem::path& images, const std::filesystem::path& labels, int classes) {
    const MappedFile img = MappedFile::open(cached_idx(images, 3));
    const MappedFile lab = MappedFile::open(cached_idx(labels, 1));
    const std::int64_t count = dim_at(img.data(), 0), labelled = dim_at(lab.data(), 0);
    LEVERS_CHECK(count == labelled, "{} holds {} images but {} holds {} labels", images.string(), count,
                 labels.string(), labelled);
    ImageSet s;
    s.image_file_ = img.memory();
    s.label_file_ = lab.memory();
    s.images_ = reinterpret_cast<const std::uint8_t*>(img.data()) + 16;
    s.labels_ = reinterpret_cast<const std::uint8_t*>(lab.data()) + 8;
    s.count_ = count;
    s.pixels_ = dim_at(img.data(), 1) * dim_at(img.data(), 2);
    s.classes_ = classes;
    for (std::int64_t i = 0; i < count; ++i)
        LEVERS_CHECK(s.labels_[i] < classes, "{}: label {} at index {} is not below {} classes", labels.string(),
                     int{s.labels_[i]}, i, classes);
    return s;
}

ImageSet ImageSet::slice(std::int64_t begin, std::int64_t end) const {
    LEVERS_CHECK(0 <= begin && begin <= end && end <= count_, "dataset slice [{}, {}) outside [0, {})", begin, end,
                 count_);
    ImageSet out = *this;
    out.images_ = images_ + begin * pixels_;
    out.labels_ = labels_ + begin;
    out.count_ = end - begin;
    return out;
}

namespace {
void put_image(float* out, const std::uint8_t* bytes, std::int64_t pixels) {
    for (std::int64_t p = 0; p < pixels; ++p) out[p] = static_cast<float>(bytes[p]) / 255.0f - 0.5f;
}
constexpr std::int64_t kAhead = 4;  // images prefetched ahead of the one converting
// New tensors each batch, from the pool: the last batch's may still be saved by a graph.
void make_batch(std::int64_t n, std::int64_t pixels, Tensor& x, Tensor& y) {
    x = Tensor::empty({n, pixels}, DType::f32);
    y = Tensor::empty({n}, DType::i32);
}
}  // namespace

void ImageSet::gather(const std::vector<std::int64_t>& rows, Tensor& x, Tensor& y) const {
    const auto n = static_cast<std::int64_t>(rows.size());
    make_batch(n, pixels_, x, y);
    float* xs = x.data<float>();
    std::int32_t* ys = y.data<std::int32_t>();
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t r = rows[static_cast<std::size_t>(i)];
        LEVERS_CHECK(r >= 0 && r < count_, "image {} of a set of {}", r, count_);
        // Shuffled rows lie anywhere in the set: the image a few rows on is asked for now, so its
        // bytes arrive while this one converts (waiting on memory was most of a small model's gather).
        if (i + kAhead < n) {
            const std::int64_t ahead = rows[static_cast<std::size_t>(i + kAhead)];
            if (ahead >= 0 && ahead < count_)
                for (std::int64_t b = 0; b < pixels_; b += 64) __builtin_prefetch(images_ + ahead * pixels_ + b);
        }
        put_image(xs + i * pixels_, images_ + r * pixels_, pixels_);
        ys[i] = labels_[r];
    }
}

void ImageSet::gather_range(std::int64_t first, std::int64_t n, Tensor& x, Tensor& y) const {
    LEVERS_CHECK(first >= 0 && n >= 0 && first + n <= count_, "images [{}, {}) of a set of {}", first, first + n,
                 count_);
    make_batch(n, pixels_, x, y);
    put_image(x.data<float>(), images_ + first * pixels_, n * pixels_);
    std::int32_t* ys = y.data<std::int32_t>();
    for (std::int64_t i = 0; i < n; ++i) ys[i] = labels_[first + i];
}

std::filesystem::path fashion_mnist_dir() {
    if (const char* d = env::get("LEVERS_FASHION_MNIST")) return d;
    return "/usr/share/datasets/fashion-mnist";
}

}  // namespace levers::data
