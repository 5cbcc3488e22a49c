#include "levers/data/gguf.hpp"

#include "levers/core/error.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <unistd.h>

namespace levers::data {

namespace fs = std::filesystem;
using Type = GgufValue::Type;

namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; so must the host be");

constexpr std::uint32_t kVersion = 3;

std::size_t scalar_bytes(Type t) {
    switch (t) {
        case Type::u8: case Type::i8: case Type::boolean: return 1;
        case Type::u16: case Type::i16: return 2;
        case Type::u32: case Type::i32: case Type::f32: return 4;
        case Type::u64: case Type::i64: case Type::f64: return 8;
        default: return 0;
    }
}
bool is_real(Type t) { return t == Type::f32 || t == Type::f64; }

const char* type_name(Type t) {
    static const char* const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                        "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<std::uint32_t>(t);
    return i < std::size(names) ? names[i] : "unknown";
}

// ---- writing

class Out {
public:
    explicit Out(std::ofstream& out) : out_(out) {}
    template <class T> void put(T v) { out_.write(reinterpret_cast<const char*>(&v), sizeof v); }
    void string(const std::string& s) {
        put<std::uint64_t>(s.size());
        out_.write(s.data(), static_cast<std::streamsize>(s.size()));
    }
    void scalar(Type t, std::int64_t i, double r) {
        switch (t) {
            case Type::u8: case Type::boolean: put(static_cast<std::uint8_t>(i)); break;
            case Type::i8: put(static_cast<std::int8_t>(i)); break;
            case Type::u16: put(static_cast<std::uint16_t>(i)); break;
            case Type::i16: put(static_cast<std::int16_t>(i)); break;
            case Type::u32: put(static_cast<std::uint32_t>(i)); break;
            case Type::i32: put(static_cast<std::int32_t>(i)); break;
            case Type::u64: put(static_cast<std::uint64_t>(i)); break;
            case Type::i64: put(i); break;
            case Type::f32: put(static_cast<float>(r)); break;
            case Type::f64: put(r); break;
            default: LEVERS_FAIL("GGUF: {} is not a scalar type", type_name(t));
        }
    }
    void value(const GgufValue& v) {
        put(static_cast<std::uint32_t>(v.type));
        if (v.type == Type::string) return string(std::get<std::string>(v.value));
        if (v.type != Type::array) {
            const bool real = is_real(v.type);
            return scalar(v.type, real ? 0 : std::get<std::int64_t>(v.value), real ? std::get<double>(v.value) : 0);
        }
        put(static_cast<std::uint32_t>(v.element));
        std::visit(
            [&](const auto& items) {
                using T = std::decay_t<decltype(items)>;
                if constexpr (std::is_same_v<T, std::vector<std::string>>) {
                    put<std::uint64_t>(items.size());
                    for (const auto& s : items) string(s);
                } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
                    put<std::uint64_t>(items.size());
                    for (auto i : items) scalar(v.element, i, 0);
                } else if constexpr (std::is_same_v<T, std::vector<double>>) {
                    put<std::uint64_t>(items.size());
                    for (auto r : items) scalar(v.element, 0, r);
                } else {
                    LEVERS_FAIL("GGUF: an array value holds a list");
                }
            },
            v.value);
    }

private:
    std::ofstream& out_;
};

std::uint64_t aligned(std::uint64_t at, std::uint32_t alignment) { return (at + alignment - 1) / alignment * alignment; }

// ---- reading

class In {
public:
    In(const std::byte* data, std::size_t size, std::string file) : data_(data), size_(size), file_(std::move(file)) {}
    template <class T> T get(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + at_, sizeof v);
        at_ += sizeof v;
        return v;
    }
    std::string string(const char* what) {
        const auto n = get<std::uint64_t>(what);
        need(n, what);
        std::string s(reinterpret_cast<const char*>(data_ + at_), n);
        at_ += n;
        return s;
    }
    std::int64_t integer(Type t, const char* what) {
        switch (t) {
            case Type::u8: case Type::boolean: return get<std::uint8_t>(what);
            case Type::i8: return get<std::int8_t>(what);
            case Type::u16: return get<std::uint16_t>(what);
            case Type::i16: return get<std::int16_t>(what);
            case Type::u32: return get<std::uint32_t>(what);
            case Type::i32: return get<std::int32_t>(what);
            case Type::u64: return static_cast<std::int64_t>(get<std::uint64_t>(what));
            case Type::i64: return get<std::int64_t>(what);
            default: LEVERS_FAIL("{}: {} is of type {}, not a number", file_, what, type_name(t));
        }
    }
    double real(Type t, const char* what) { return t == Type::f32 ? get<float>(what) : get<double>(what); }
    GgufValue value(const std::string& key) {
        GgufValue v;
        v.type = static_cast<Type>(get<std::uint32_t>("a value's type"));
        v.element = v.type;
        const char* what = key.c_str();
        if (v.type == Type::string) {
            v.value = string(what);
        } else if (is_real(v.type)) {
            v.value = real(v.type, what);
        } else if (v.type == Type::array) {
            v.element = static_cast<Type>(get<std::uint32_t>(what));
            const auto n = get<std::uint64_t>(what);
            // Each element takes at least a byte: a count past the file's end is a bad file, not an allocation.
            need(n, what);
            if (v.element == Type::string) {
                std::vector<std::string> items(n);
                for (auto& s : items) s = string(what);
                v.value = std::move(items);
            } else if (is_real(v.element)) {
                std::vector<double> items(n);
                for (auto& r : items) r = real(v.element, what);
                v.value = std::move(items);
            } else {
                LEVERS_CHECK(scalar_bytes(v.element) > 0, "{}: metadata {} is an array of {}, which levers does not read",
                             file_, key, type_name(v.element));
                std::vector<std::int64_t> items(n);
                for (auto& i : items) i = integer(v.element, what);
                v.value = std::move(items);
            }
        } else {
            LEVERS_CHECK(scalar_bytes(v.type) > 0, "{}: metadata {} has an unknown type ({})", file_, key,
                         static_cast<std::uint32_t>(v.type));
            v.value = integer(v.type, what);
        }
        return v;
    }
    std::size_t at() const { return at_; }

private:
    void need(std::uint64_t n, const char* what) const {
        LEVERS_CHECK(n <= size_ - at_, "{} is truncated or malformed: {} runs past its end (byte {} of {})", file_, what,
                     at_, size_);
    }
    const std::byte* data_;
    std::size_t size_, at_ = 0;
    std::string file_;
};

}  // namespace

// ---- values

std::int64_t GgufValue::as_int(const std::string& key) const {
    LEVERS_CHECK(type != Type::array && !is_real(type) && type != Type::string,
                 "GGUF metadata {} is {}, not an integer", key, type_name(type));
    return std::get<std::int64_t>(value);
}
double GgufValue::as_real(const std::string& key) const {
    if (is_real(type)) return std::get<double>(value);
    return static_cast<double>(as_int(key));
}
const std::string& GgufValue::as_string(const std::string& key) const {
    LEVERS_CHECK(type == Type::string, "GGUF metadata {} is {}, not a string", key, type_name(type));
    return std::get<std::string>(value);
}
const std::vector<std::string>& GgufValue::as_strings(const std::string& key) const {
    LEVERS_CHECK(type == Type::array && element == Type::string, "GGUF metadata {} is not an array of strings", key);
    return std::get<std::vector<std::string>>(value);
}

std::string GgufValue::summary() const {
    constexpr std::size_t kShown = 4;
    return std::visit(
        [&](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::int64_t>) {
                return type == Type::boolean ? (v ? "true" : "false") : fmt::format("{}", v);
            } else if constexpr (std::is_same_v<T, double>) {
                return fmt::format("{:g}", v);
            } else if constexpr (std::is_same_v<T, std::string>) {  // quoted and escaped, as C++ would write it
                return v.size() > 60 ? fmt::format("{:?}... ({} characters)", v.substr(0, 60), v.size())
                                     : fmt::format("{:?}", v);
            } else {
                std::string items;
                for (std::size_t i = 0; i < std::min(kShown, v.size()); ++i) {
                    if constexpr (std::is_same_v<T, std::vector<std::string>>)
                        items += fmt::format("{}{:?}", i ? ", " : "", v[i]);
                    else
                        items += fmt::format("{}{}", i ? ", " : "", v[i]);
                }
                return fmt::format("[{}{}] ({} {})", items, v.size() > kShown ? ", ..." : "", v.size(),
                                   type_name(element));
            }
        },
        value);
}

// ---- tensors

std::int64_t GgufTensorInfo::numel() const {
    std::int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
}
std::size_t GgufTensorInfo::bytes() const {
    return dims.empty() ? ggml_row_bytes(type, 1) : ggml_row_bytes(type, dims[0]) * static_cast<std::size_t>(rows());
}

// ---- writer

GgufWriter::GgufWriter(fs::path path, std::uint32_t alignment)
    : path_(std::move(path)), temporary_(path_.string() + ".tmp" + std::to_string(::getpid())),
      alignment_(alignment) {}

GgufWriter::~GgufWriter() {
    if (finished_) return;
    out_.close();
    std::error_code ignored;
    fs::remove(temporary_, ignored);
}

void GgufWriter::set(const std::string& key, GgufValue value) {
    for (auto& [k, v] : metadata_)
        if (k == key) return void(v = std::move(value));
    metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<std::int64_t> dims, GgmlType type) {
    LEVERS_CHECK(!out_.is_open(), "GGUF: tensor {} declared after the data began", name);
    GgufTensorInfo info{name, std::move(dims), type, 0};
    const std::uint64_t end = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().bytes();
    info.offset = aligned(end, alignment_);
    info.bytes();  // a row the type's blocks cannot divide is refused here, before anything is written
    tensors_.push_back(std::move(info));
}

void GgufWriter::begin_data() {
    if (alignment_ != 32) set("general.alignment", GgufValue::u32(alignment_));
    out_.open(temporary_, std::ios::binary | std::ios::trunc);
    LEVERS_CHECK(out_.good(), "cannot write {}", temporary_.string());
    Out o(out_);
    out_.write("GGUF", 4);
    o.put(kVersion);
    o.put<std::uint64_t>(tensors_.size());
    o.put<std::uint64_t>(metadata_.size());
    for (const auto& [key, value] : metadata_) {
        o.string(key);
        o.value(value);
    }
    for (const auto& t : tensors_) {
        o.string(t.name);
        o.put<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
        for (auto d : t.dims) o.put<std::uint64_t>(static_cast<std::uint64_t>(d));
        o.put(static_cast<std::uint32_t>(t.type));
        o.put(t.offset);
    }
    const auto header = static_cast<std::uint64_t>(out_.tellp());
    data_start_ = aligned(header, alignment_);
    for (auto i = header; i < data_start_; ++i) out_.put('\0');
}

void GgufWriter::write_tensor(const std::byte* data, std::size_t bytes) {
    LEVERS_CHECK(out_.is_open() && next_ < tensors_.size(), "GGUF: more tensor data written than declared");
    const GgufTensorInfo& t = tensors_[next_];
    LEVERS_CHECK(part_ + bytes <= t.bytes(), "GGUF: tensor {} given {} bytes, its table says {}", t.name,
                 part_ + bytes, t.bytes());
    if (part_ == 0)
        for (auto i = written_; i < t.offset; ++i) out_.put('\0');
    out_.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    part_ += bytes;
    written_ = t.offset + part_;
    if (part_ == t.bytes()) ++next_, part_ = 0;
    LEVERS_CHECK(out_.good(), "cannot write {} (disk full?)", temporary_.string());
}

std::uint64_t GgufWriter::finish() {
    if (!out_.is_open()) begin_data();
    LEVERS_CHECK(next_ == tensors_.size(), "GGUF: {} of {} tensors written", next_, tensors_.size());
    out_.close();
    LEVERS_CHECK(!out_.fail(), "cannot write {} (disk full?)", temporary_.string());
    fs::rename(temporary_, path_);
    finished_ = true;
    return data_start_ + written_;
}

// ---- reader

GgufFile GgufFile::open(const fs::path& path) {
    GgufFile f;
    f.path_ = path;
    f.file_ = MappedFile::open(path);
    f.base_ = f.file_.data();
    In in(f.base_, f.file_.size(), path.string());
    char magic[4];
    for (char& c : magic) c = static_cast<char>(in.get<std::uint8_t>("the magic"));
    LEVERS_CHECK(std::memcmp(magic, "GGUF", 4) == 0, "{} is not a GGUF file (it does not start with \"GGUF\")",
                 path.string());
    f.version_ = in.get<std::uint32_t>("the version");
    LEVERS_CHECK(f.version_ == 2 || f.version_ == 3, "{} is GGUF version {}; levers reads versions 2 and 3",
                 path.string(), f.version_);
    const auto n_tensors = in.get<std::uint64_t>("the tensor count");
    const auto n_keys = in.get<std::uint64_t>("the metadata count");
    LEVERS_CHECK(n_tensors <= f.file_.size() && n_keys <= f.file_.size(), "{} is malformed: {} tensors, {} keys",
                 path.string(), n_tensors, n_keys);
    for (std::uint64_t i = 0; i < n_keys; ++i) {
        std::string key = in.string("a metadata key");
        GgufValue value = in.value(key);
        f.metadata_.emplace_back(std::move(key), std::move(value));
    }
    if (const GgufValue* a = f.find("general.alignment")) {
        const auto alignment = a->as_int("general.alignment");
        LEVERS_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0,
                     "{}: general.alignment is {}, not a power of two", path.string(), alignment);
        f.alignment_ = static_cast<std::uint32_t>(alignment);
    }
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
        GgufTensorInfo t;
        t.name = in.string("a tensor's name");
        const auto n_dims = in.get<std::uint32_t>("a tensor's dimension count");
        LEVERS_CHECK(n_dims <= 4, "{}: tensor {} has {} dimensions (ggml has at most 4)", path.string(), t.name, n_dims);
        for (std::uint32_t d = 0; d < n_dims; ++d)
            t.dims.push_back(static_cast<std::int64_t>(in.get<std::uint64_t>("a tensor's dimension")));
        t.type = static_cast<GgmlType>(in.get<std::uint32_t>("a tensor's type"));
        t.offset = in.get<std::uint64_t>("a tensor's offset");
        f.tensors_.push_back(std::move(t));
    }
    f.data_start_ = aligned(in.at(), f.alignment_);
    for (const auto& t : f.tensors_) {
        if (ggml_type_info(t.type) == nullptr) continue;  // listed, but its size is not known here
        LEVERS_CHECK(f.data_start_ + t.offset + t.bytes() <= f.file_.size(),
                     "{} is truncated: tensor {} ends past the end of the file", path.string(), t.name);
    }
    return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
    for (const auto& [k, v] : metadata_)
        if (k == key) return &v;
    return nullptr;
}

const GgufValue& GgufFile::at(const std::string& key) const {
    const GgufValue* v = find(key);
    LEVERS_CHECK(v != nullptr, "{} has no metadata {}", path_.string(), key);
    return *v;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
    for (const auto& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

std::vector<float> GgufFile::read_f32(const GgufTensorInfo& info) const {
    std::vector<float> out(static_cast<std::size_t>(info.numel()));
    const std::int64_t row = info.dims.empty() ? 1 : info.dims[0];
    const std::size_t row_bytes = ggml_row_bytes(info.type, row);
    for (std::int64_t r = 0; r < info.rows(); ++r)
        ggml_dequantize_row(info.type, data(info) + static_cast<std::size_t>(r) * row_bytes,
                            out.data() + r * row, row);
    return out;
}

}  // namespace levers::data
