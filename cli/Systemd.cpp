// sd_notify's protocol and $JOURNAL_STREAM (see Systemd.h).
#include "Systemd.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "process/FileDescriptor.h"

namespace flink::cli::systemd {
namespace {

/// "<decimal>" as a whole, or nullopt.
template <typename Number>
std::optional<Number> wholeNumber(std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::error_code notify(std::string_view state) {
  const char* variable = std::getenv("NOTIFY_SOCKET");
  if (variable == nullptr || *variable == '\0') return {};
  const std::string_view address = variable;

  // As systemd fills it (sockaddr_un_set_path): a path with its NUL counted; an abstract name
  // with its leading NUL in place of the '@' and no NUL after it.
  sockaddr_un peer{};
  peer.sun_family = AF_UNIX;
  socklen_t length = 0;
  if (address.front() == '/' && address.size() < sizeof(peer.sun_path)) {
    std::memcpy(peer.sun_path, address.data(), address.size());
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + 1);
  } else if (address.front() == '@' && address.size() >= 2 &&
             address.size() <= sizeof(peer.sun_path)) {
    peer.sun_path[0] = '\0';
    std::memcpy(peer.sun_path + 1, address.data() + 1, address.size() - 1);
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  } else {
    return std::make_error_code(std::errc::invalid_argument);
  }

  const process::FileDescriptor socket(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!socket) return {errno, std::system_category()};
  // One datagram: systemd reads it whole. MSG_NOSIGNAL: a gone manager is an error, not a signal.
  const ssize_t sent = ::sendto(socket.get(), state.data(), state.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&peer), length);
  if (sent < 0) return {errno, std::system_category()};
  if (static_cast<std::size_t>(sent) != state.size()) {
    return std::make_error_code(std::errc::message_size);
  }
  return {};
}

bool stderrIsJournal() {
  const char* variable = std::getenv("JOURNAL_STREAM");
  if (variable == nullptr) return false;
  const std::string_view text = variable;
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const std::optional<unsigned long long> device =
      wholeNumber<unsigned long long>(text.substr(0, colon));
  const std::optional<unsigned long long> inode =
      wholeNumber<unsigned long long>(text.substr(colon + 1));
  if (!device || !inode) return false;
  struct stat info {};
  if (::fstat(STDERR_FILENO, &info) != 0) return false;
  return static_cast<unsigned long long>(info.st_dev) == *device &&
         static_cast<unsigned long long>(info.st_ino) == *inode;
}

}  // namespace flink::cli::systemd
