// Reading `--amount` (see AmountOption.h).
#include "commands/AmountOption.h"

#include <charconv>
#include <string>
#include <system_error>

#include "Console.h"
#include "util/Strings.h"

namespace flink::cli {

std::optional<std::int64_t> parseAmountOption(std::string_view text) {
  std::int64_t amount = 0;
  const char* end = text.data() + text.size();
  const auto [last, error] = std::from_chars(text.data(), end, amount);
  // from_chars takes a '-' but never a '+' or a space; a negative amount is refused below.
  if (text.empty() || error != std::errc() || last != end || amount <= 0) {
    printError("invalid --amount '" + strings::quoteForMessage(text) +
               "': the amount of GPUs must be a positive integer" +
               (error == std::errc::result_out_of_range ? " below 2^63" : ""));
    return std::nullopt;
  }
  return amount;
}

}  // namespace flink::cli
