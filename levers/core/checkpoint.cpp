#include "levers/core/checkpoint.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <fcntl.h>
#include <unistd.h>

namespace levers {

namespace {

constexpr char kMagic[8] = {'L', 'E', 'V', 'E', 'R', 'S', 'C', 'K'};
constexpr std::size_t kPrefix = 8 + 4 + 8;  // magic, version, header length
constexpr std::size_t kAlign = 64;

// CRC-32 (the zlib/PNG polynomial) through zlib: several times faster than
// Boost.CRC's byte table on tensor-sized inputs.
std::uint32_t crc32(const void* data, std::size_t n) {
    uLong crc = ::crc32(0L, Z_NULL, 0);
    const auto* p = static_cast<const Bytef*>(data);
    while (n > 0) {  // zlib takes at most 4 GiB per call
        const auto chunk = static_cast<uInt>(std::min<std::size_t>(n, std::size_t{1} << 30));
        crc = ::crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return static_cast<std::uint32_t>(crc);
}

template <class T> void put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
template <class T> T take(const std::string& in, std::size_t at) {
    T v;
    std::memcpy(&v, in.data() + at, sizeof v);
    return v;
}

DType dtype_named(const std::string& name, const std::string& file) {
    for (DType t : {DType::f32, DType::f64, DType::bf16, DType::i32})
        if (name_of(t) == name) return t;
    LEVERS_FAIL("{}: unknown tensor dtype '{}'", file, name);
}

void write_all(int fd, const char* data, std::size_t n, const std::string& file) {
    while (n > 0) {
        const ssize_t w = ::write(fd, data, n);
        LEVERS_CHECK(w > 0, "{}: write failed: {}", file, std::strerror(errno));
        data += w;
        n -= static_cast<std::size_t>(w);
    }
}

}  // namespace

const Tensor& Checkpoint::at(const std::string& name) const {
    std::string names;
    for (const auto& t : tensors) {
        if (t.name == name) return t.tensor;
        names += (names.empty() ? "" : ", ") + t.name;
    }
    LEVERS_FAIL("checkpoint has no tensor '{}'; it holds: {}", name, names);
}

void write_checkpoint(const std::filesystem::path& path, const nlohmann::json& metadata,
                      const std::vector<NamedTensor>& on_any_device) {
    std::vector<NamedTensor> tensors;  // host copies of what lives on a GPU
    for (const auto& t : on_any_device) tensors.push_back({t.name, t.tensor.to(Device::cpu())});
    nlohmann::json table = nlohmann::json::array();
    std::size_t offset = 0;
    for (const auto& t : tensors) {
        std::vector<std::int64_t> shape;
        for (int i = 0; i < t.tensor.shape().ndim(); ++i) shape.push_back(t.tensor.dim(i));
        table.push_back({{"name", t.name}, {"dtype", name_of(t.tensor.dtype())}, {"shape", shape},
                         {"offset", offset}, {"bytes", t.tensor.bytes()},
                         {"crc32", crc32(t.tensor.raw(), t.tensor.bytes())}});
        offset += (t.tensor.bytes() + kAlign - 1) / kAlign * kAlign;
    }
    const std::string header = nlohmann::json{{"metadata", metadata}, {"tensors", table}}.dump();
    std::string head(kMagic, sizeof kMagic);
    put(head, kCheckpointVersion);
    put<std::uint64_t>(head, header.size());
    head += header;
    put(head, crc32(header.data(), header.size()));
    const std::size_t data_start = (head.size() + kAlign - 1) / kAlign * kAlign;
    head.resize(data_start, '\0');

    const std::filesystem::path tmp = path.string() + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    LEVERS_CHECK(fd >= 0, "{}: cannot create: {}", tmp.string(), std::strerror(errno));
    try {
        write_all(fd, head.data(), head.size(), tmp.string());
        const std::string pad(kAlign, '\0');
        for (const auto& t : tensors) {
            write_all(fd, static_cast<const char*>(t.tensor.raw()), t.tensor.bytes(), tmp.string());
            write_all(fd, pad.data(), (kAlign - t.tensor.bytes() % kAlign) % kAlign, tmp.string());
        }
        LEVERS_CHECK(::fsync(fd) == 0, "{}: fsync failed: {}", tmp.string(), std::strerror(errno));
    } catch (...) {
        ::close(fd);
        std::filesystem::remove(tmp);
        throw;
    }
    ::close(fd);
    std::filesystem::rename(tmp, path);
    const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        ::fsync(dfd);  // the rename itself survives a crash
        ::close(dfd);
    }
}

namespace {

// Checks the prefix and the header of a checkpoint whose first bytes are
// `head` (the whole file, or at least its prefix, header and header CRC) and
// whose size is `size`; returns the header's JSON text.
std::string checked_header(const std::string& head, std::size_t size, const std::string& file) {
    LEVERS_CHECK(head.size() >= kPrefix && std::memcmp(head.data(), kMagic, sizeof kMagic) == 0,
                 "{}: not a levers checkpoint (no LEVERSCK magic)", file);
    const auto version = take<std::uint32_t>(head, 8);
    LEVERS_CHECK(version == kCheckpointVersion, "{}: checkpoint format version {}, this levers reads version {}", file,
                 version, kCheckpointVersion);
    const auto header_len = take<std::uint64_t>(head, 12);
    LEVERS_CHECK(header_len <= size - kPrefix && size - kPrefix - header_len >= 4 &&
                     head.size() >= kPrefix + header_len + 4,
                 "{}: truncated: the header of {} bytes does not fit in {} bytes", file, header_len, size);
    std::string header = head.substr(kPrefix, header_len);
    LEVERS_CHECK(take<std::uint32_t>(head, kPrefix + header_len) == crc32(header.data(), header.size()),
                 "{}: corrupted: the header's checksum does not match", file);
    return header;
}

}  // namespace

nlohmann::json read_checkpoint_metadata(const std::filesystem::path& path) {
    const std::string file = path.string();
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    LEVERS_CHECK(!ec, "{}: {} (expected a levers checkpoint)", file, ec.message());
    std::ifstream in(path, std::ios::binary);
    std::string head(static_cast<std::size_t>(std::min<std::uintmax_t>(size, kPrefix)), '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    if (in && head.size() == kPrefix) {  // then the header and its checksum, where the file holds them
        const auto header_len = take<std::uint64_t>(head, 12);
        if (header_len <= size - kPrefix && size - kPrefix - header_len >= 4) {
            head.resize(kPrefix + header_len + 4);
            in.read(head.data() + kPrefix, static_cast<std::streamsize>(header_len + 4));
        }
    }
    try {
        return nlohmann::json::parse(checked_header(head, size, file)).at("metadata");
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: malformed checkpoint header: {}", file, e.what());
    }
}

Checkpoint read_checkpoint(const std::filesystem::path& path) {
    const std::string file = path.string();
    const std::string bytes = read_file(path, "expected a levers checkpoint");
    const std::string header = checked_header(bytes, bytes.size(), file);
    const std::size_t header_len = header.size();
    const std::size_t data_start = (kPrefix + header_len + 4 + kAlign - 1) / kAlign * kAlign;
    Checkpoint out;
    nlohmann::json parsed;
    try {
        parsed = nlohmann::json::parse(header);
        out.metadata = parsed.at("metadata");
        for (const auto& t : parsed.at("tensors")) {
            const std::string name = t.at("name");
            const auto shape = t.at("shape").get<std::vector<std::int64_t>>();
            const Shape s(shape);
            Tensor tensor = Tensor::zeros(s, dtype_named(t.at("dtype"), file));
            const std::size_t offset = t.at("offset"), n = t.at("bytes");
            LEVERS_CHECK(n == tensor.bytes(), "{}: tensor '{}' claims {} bytes for its shape's {}", file, name, n,
                         tensor.bytes());
            LEVERS_CHECK(data_start + offset + n <= bytes.size(),
                         "{}: truncated: tensor '{}' ends at byte {} of a {}-byte file", file, name,
                         data_start + offset + n, bytes.size());
            std::memcpy(tensor.raw(), bytes.data() + data_start + offset, n);
            LEVERS_CHECK(crc32(tensor.raw(), n) == t.at("crc32").get<std::uint32_t>(),
                         "{}: corrupted: tensor '{}' does not match its checksum", file, name);
            out.tensors.push_back({name, tensor});
        }
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: malformed checkpoint header: {}", file, e.what());
    }
    return out;
}

}  // namespace levers
