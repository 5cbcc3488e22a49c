// Unicode normalisation form C (canonical composition), as Hugging Face's NFC
// normaliser applies it before tokenizing (Qwen's tokenizers). utf8proc does
// the work (a small library: ICU's data alone is 30 MB, too much for the GPU
// check's bundle).
#pragma once

#include <string>
#include <string_view>

namespace levers::data {

// `text` (UTF-8) in NFC; ASCII comes back as it is. Throws levers::Error on
// invalid UTF-8.
std::string nfc(std::string_view text);

}  // namespace levers::data
