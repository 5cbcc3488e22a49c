#include "levers/distributed/nccl_id.hpp"

#include "levers/core/error.hpp"

namespace levers::dist {

std::string to_hex(const std::vector<unsigned char>& bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : bytes) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::vector<unsigned char> from_hex(const std::string& text, std::size_t expected) {
    LEVERS_CHECK(text.size() == 2 * expected, "a NCCL id of {} bytes was expected, the store holds {} hex digits",
                 expected, text.size());
    auto value = [&](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        LEVERS_FAIL("the NCCL id in the store is not hex (character '{}')", c);
    };
    std::vector<unsigned char> out(expected);
    for (std::size_t i = 0; i < expected; ++i)
        out[i] = static_cast<unsigned char>(value(text[2 * i]) << 4 | value(text[2 * i + 1]));
    return out;
}

std::vector<unsigned char> share_id(int rank, Store& store, const std::string& key,
                                    const std::function<std::vector<unsigned char>()>& make, std::size_t bytes) {
    if (rank == 0) {
        auto id = make();
        LEVERS_CHECK(id.size() == bytes, "the NCCL id has {} bytes, expected {}", id.size(), bytes);
        store.set(key, to_hex(id));
        return id;
    }
    return from_hex(store.get(key), bytes);
}

}  // namespace levers::dist
