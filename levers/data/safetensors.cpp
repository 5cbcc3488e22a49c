#include "levers/data/safetensors.hpp"

#include "levers/core/error.hpp"
#include "levers/data/half.hpp"

#include <nlohmann/json.hpp>

#include <bit>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace levers::data {

namespace fs = std::filesystem;

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so must the host be");

std::size_t width_of(const std::string& dtype) {
    if (dtype == "F64") return 8;
    if (dtype == "F32") return 4;
    if (dtype == "F16" || dtype == "BF16") return 2;
    if (dtype == "U8") return 1;
    return 0;
}

}  // namespace

std::size_t stored_bytes(std::int64_t numel, const std::string& dtype) {
    LEVERS_CHECK(width_of(dtype) > 0, "safetensors: dtype {} is not one levers writes (F64, F32, BF16, F16, U8)", dtype);
    return static_cast<std::size_t>(numel) * width_of(dtype);
}

void StoredTensor::read_f32(float* out) const {
    LEVERS_CHECK(dtype != "U8", "a tensor of bytes (U8: packed 4-bit codes) read as real numbers");
    const std::int64_t n = shape.numel();
    if (dtype == "F32") {
        std::memcpy(out, data, static_cast<std::size_t>(n) * 4);
        return;
    }
    if (dtype == "F64") {
        for (std::int64_t i = 0; i < n; ++i) {
            double v;
            std::memcpy(&v, data + 8 * i, 8);
            out[i] = static_cast<float>(v);
        }
        return;
    }
    const bool half = dtype == "F16";
    for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = half ? half_to_float(h) : bf16_to_float(h);
    }
}

Tensor StoredTensor::to_f32() const {
    Tensor t = Tensor::empty(shape, DType::f32);
    read_f32(t.data<float>());
    return t;
}

Tensor StoredTensor::to_f64() const {
    if (dtype != "F64") return to_f32().to(DType::f64);
    Tensor t = Tensor::empty(shape, DType::f64);
    std::memcpy(t.raw(), data, static_cast<std::size_t>(shape.numel()) * 8);
    return t;
}

Tensor StoredTensor::to_u8() const {
    LEVERS_CHECK(dtype == "U8", "a {} tensor read as bytes (U8)", dtype);
    Tensor t = Tensor::empty(shape, DType::u8);
    std::memcpy(t.raw(), data, bytes);
    return t;
}

SafeTensorsFile SafeTensorsFile::open(const fs::path& path) {
    const std::string file = path.string();
    SafeTensorsFile out;
    out.path_ = path;
    LEVERS_CHECK(fs::exists(path), "{}: no such file", file);
    out.file_ = MappedFile::open(path);
    const auto* bytes = reinterpret_cast<const char*>(out.file_.data());
    const std::size_t size = out.file_.size();
    LEVERS_CHECK(size >= 8, "{}: truncated ({} bytes): not a safetensors file", file, size);
    std::uint64_t header_len;
    std::memcpy(&header_len, bytes, 8);
    LEVERS_CHECK(header_len <= size - 8, "{}: header of {} bytes in a file of {}: truncated or not a "
                 "safetensors file", file, header_len, size);
    const auto header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len, nullptr, false);
    LEVERS_CHECK(header.is_object(), "{}: the header is not a JSON object: not a safetensors file", file);
    const std::size_t data_start = 8 + header_len, data_len = size - data_start;

    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__") {
            for (const auto& [k, v] : info.items())
                if (v.is_string()) out.metadata_[k] = v.get<std::string>();
            continue;
        }
        std::string dtype;
        std::vector<std::int64_t> shape;
        std::uint64_t begin = 0, end = 0;
        try {
            dtype = info.at("dtype").get<std::string>();
            shape = info.at("shape").get<std::vector<std::int64_t>>();
            const auto offsets = info.at("data_offsets").get<std::vector<std::uint64_t>>();
            LEVERS_CHECK(offsets.size() == 2, "{}: tensor '{}' has {} data offsets, expected 2", file, name,
                         offsets.size());
            begin = offsets[0];
            end = offsets[1];
        } catch (const nlohmann::json::exception& e) {
            LEVERS_FAIL("{}: tensor '{}' has a malformed entry: {}", file, name, e.what());
        }
        const std::size_t width = width_of(dtype);
        LEVERS_CHECK(width > 0, "{}: tensor '{}' is {}; levers reads F64, F32, F16, BF16 (and U8: 4-bit codes)", file,
                     name, dtype);
        std::int64_t numel = 1;
        LEVERS_CHECK(shape.size() <= static_cast<std::size_t>(Shape::kMaxDims), "{}: tensor '{}' has {} dimensions, "
                     "at most {} are supported", file, name, shape.size(), Shape::kMaxDims);
        for (auto d : shape) {
            LEVERS_CHECK(d >= 0, "{}: tensor '{}' has a negative dimension", file, name);
            numel *= d;
        }
        LEVERS_CHECK(begin <= end && end <= data_len, "{}: tensor '{}' spans bytes {}..{} of {}: truncated", file,
                     name, begin, end, data_len);
        LEVERS_CHECK(end - begin == static_cast<std::uint64_t>(numel) * width,
                     "{}: tensor '{}' holds {} bytes, its shape and dtype need {}", file, name, end - begin,
                     static_cast<std::uint64_t>(numel) * width);
        out.tensors_.emplace(name, StoredTensor{.dtype = dtype,
                                                .shape = Shape(shape),
                                                .data = out.file_.data() + data_start + begin,
                                                .bytes = end - begin});
    }
    return out;
}

SafeTensors read_safetensors(const fs::path& path) {
    const SafeTensorsFile file = SafeTensorsFile::open(path);
    SafeTensors out{.tensors = {}, .metadata = file.metadata()};
    for (const auto& [name, stored] : file.tensors()) out.tensors.emplace(name, stored.to_f32());
    return out;
}

void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata, const std::string& dtype,
                       const std::set<std::string>& kept_f32) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::uint64_t offset = 0;
    // How each is stored: bytes as U8; the named ones as F32; the others as `dtype`.
    auto stored_as = [&](const std::string& name, const Tensor& t) -> std::string {
        if (t.dtype() == DType::u8) return "U8";
        return kept_f32.count(name) ? "F32" : dtype;
    };
    for (const auto& [name, t] : tensors) {
        LEVERS_CHECK((t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::u8) &&
                         t.device().is_cpu() && t.is_contiguous(),
                     "safetensors export takes dense f32, f64 or u8 host tensors; '{}' is {} on {}", name,
                     name_of(t.dtype()), t.device().str());
        std::vector<std::int64_t> shape;
        for (int d = 0; d < t.shape().ndim(); ++d) shape.push_back(t.shape()[d]);
        const std::string as = stored_as(name, t);
        const std::size_t bytes = stored_bytes(t.numel(), as);
        header[name] = {{"dtype", as}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
    const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary);
        const std::uint64_t len = text.size();
        out.write(reinterpret_cast<const char*>(&len), 8);
        out << text;
        std::vector<std::uint16_t> halves;
        for (const auto& [name, given] : tensors) {
            const std::string as = stored_as(name, given);
            const DType stored = as == "U8" ? DType::u8 : as == "F64" ? DType::f64 : DType::f32;  // halves from f32
            const Tensor t = given.dtype() == stored ? given : given.to(stored);
            if (as == "F32" || as == "F64" || as == "U8") {
                out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
                continue;
            }
            halves.resize(static_cast<std::size_t>(t.numel()));
            const float* v = t.data<float>();
            for (std::size_t i = 0; i < halves.size(); ++i)
                halves[i] = as == "BF16" ? float_to_bf16(v[i]) : float_to_half(v[i]);
            out.write(reinterpret_cast<const char*>(halves.data()), static_cast<std::streamsize>(2 * halves.size()));
        }
        LEVERS_CHECK(out.good(), "cannot write {}", tmp.string());
    }
    fs::rename(tmp, path);
}

}  // namespace levers::data
