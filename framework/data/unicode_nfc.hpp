// Unicode normalisation form C (canonical composition), as Hugging Face's NFC
// normaliser applies it before tokenizing (Qwen's tokenizers). ICU does the work.
#pragma once

#include <string>
#include <string_view>

namespace levers::data {

// `text` (UTF-8) in NFC; ASCII comes back unchanged without a copy through
// ICU. Throws levers::Error on invalid UTF-8.
std::string nfc(std::string_view text);

}  // namespace levers::data
