#include "framework/data/safetensors.hpp"

#include "framework/core/error.hpp"
#include "framework/core/read_file.hpp"

#include <nlohmann/json.hpp>

#include <bit>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace levers::data {

namespace fs = std::filesystem;

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so must the host be");

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            int e = -1;
            std::uint32_t m = mant;
            do {
                ++e;
                m <<= 1;
            } while ((m & 0x400u) == 0);
            bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    return std::bit_cast<float>(bits);
}

}  // namespace

SafeTensors read_safetensors(const fs::path& path) {
    const std::string file = path.string();
    const std::string bytes = read_file(path);
    LEVERS_CHECK(bytes.size() >= 8, "{}: truncated ({} bytes): not a safetensors file", file, bytes.size());
    std::uint64_t header_len;
    std::memcpy(&header_len, bytes.data(), 8);
    LEVERS_CHECK(header_len <= bytes.size() - 8, "{}: header of {} bytes in a file of {}: truncated or not a "
                 "safetensors file", file, header_len, bytes.size());
    const auto header = nlohmann::json::parse(bytes.substr(8, header_len), nullptr, false);
    LEVERS_CHECK(header.is_object(), "{}: the header is not a JSON object: not a safetensors file", file);
    const std::size_t data_start = 8 + header_len, data_len = bytes.size() - data_start;

    SafeTensors out;
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__") {
            for (const auto& [k, v] : info.items())
                if (v.is_string()) out.metadata[k] = v.get<std::string>();
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
        std::size_t width = 0;
        if (dtype == "F32") width = 4;
        else if (dtype == "F16" || dtype == "BF16") width = 2;
        else LEVERS_FAIL("{}: tensor '{}' is {}; levers reads F32, F16 and BF16", file, name, dtype);
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
        Tensor t = Tensor::zeros(Shape(shape), DType::f32);
        float* dst = t.data<float>();
        const char* src = bytes.data() + data_start + begin;
        for (std::int64_t i = 0; i < numel; ++i) {
            if (dtype == "F32") {
                std::memcpy(dst + i, src + 4 * i, 4);
            } else {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                dst[i] = dtype == "F16" ? half_to_float(h) : bf16_to_float(h);
            }
        }
        out.tensors.emplace(name, std::move(t));
    }
    return out;
}

void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        LEVERS_CHECK(t.dtype() == DType::f32, "safetensors export writes f32; '{}' is {}", name, name_of(t.dtype()));
        std::vector<std::int64_t> shape;
        for (int d = 0; d < t.shape().ndim(); ++d) shape.push_back(t.shape()[d]);
        header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + t.bytes()}}};
        offset += t.bytes();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
    const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary);
        const std::uint64_t len = text.size();
        out.write(reinterpret_cast<const char*>(&len), 8);
        out << text;
        for (const auto& [name, t] : tensors)
            out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
        LEVERS_CHECK(out.good(), "cannot write {}", tmp.string());
    }
    fs::rename(tmp, path);
}

}  // namespace levers::data
