#include "framework/data/unicode_nfc.hpp"

#include "framework/core/error.hpp"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <vector>

namespace levers::data {

std::string nfc(std::string_view text) {
    if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
        return std::string(text);
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2* normalizer = unorm2_getNFCInstance(&err);
    LEVERS_CHECK(U_SUCCESS(err), "ICU has no NFC normaliser: {}", u_errorName(err));
    // UTF-8 -> UTF-16 (at most one unit per byte), normalised (at most 3x longer), -> UTF-8.
    std::vector<UChar> wide(text.size() + 1), composed(3 * text.size() + 16);
    std::int32_t length = 0;
    u_strFromUTF8(wide.data(), static_cast<std::int32_t>(wide.size()), &length, text.data(),
                  static_cast<std::int32_t>(text.size()), &err);
    LEVERS_CHECK(U_SUCCESS(err), "text is not valid UTF-8 ({})", u_errorName(err));
    const std::int32_t n = unorm2_normalize(normalizer, wide.data(), length, composed.data(),
                                            static_cast<std::int32_t>(composed.size()), &err);
    LEVERS_CHECK(U_SUCCESS(err), "NFC normalisation failed: {}", u_errorName(err));
    std::string out(4 * static_cast<std::size_t>(n) + 1, '\0');
    std::int32_t bytes = 0;
    u_strToUTF8(out.data(), static_cast<std::int32_t>(out.size()), &bytes, composed.data(), n, &err);
    LEVERS_CHECK(U_SUCCESS(err), "NFC normalisation failed: {}", u_errorName(err));
    out.resize(static_cast<std::size_t>(bytes));
    return out;
}

}  // namespace levers::data
