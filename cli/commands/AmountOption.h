// The `--amount N` that discover and exec share: read from the text as typed, so that both
// accept and refuse the same values with the same words.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace flink::cli {

/// The amount `text` asks for: a decimal integer from 1 to 2^63 - 1 (leading zeros allowed, no
/// sign, no spaces). Anything else — empty, `two`, `1.5`, `0x2`, `1e3`, `+1`, negative, zero, too
/// large — gets an error line on stderr ("invalid --amount '…'") and nullopt, for exit 2.
std::optional<std::int64_t> parseAmountOption(std::string_view text);

}  // namespace flink::cli
