#include "host/defaultdiscovery/DefaultScript.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "process/FileDescriptor.h"

namespace flink::defaultdiscovery {
namespace {

namespace fs = std::filesystem;

/// Reads exactly `size` bytes at `offset`; false on a short read or an error.
bool readAt(int fd, void* buffer, std::size_t size, std::uint64_t offset) noexcept {
  auto* bytes = static_cast<char*>(buffer);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

/// Whether `path` is a regular 64-bit ELF file whose section kProgramMarkSection holds
/// defaultProgramMark() (and its NUL). Every offset and size read from the file is checked
/// against the file's size before it is used.
bool isOurProgram(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return false;
  const process::FileDescriptor file(fd);
  struct stat status {};
  if (::fstat(file.get(), &status) != 0 || !S_ISREG(status.st_mode)) return false;
  const auto fileSize = static_cast<std::uint64_t>(status.st_size);
  const auto fits = [fileSize](std::uint64_t offset, std::uint64_t size) {
    return offset <= fileSize && size <= fileSize - offset;
  };

  Elf64_Ehdr header{};
  if (!readAt(file.get(), &header, sizeof header, 0) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0 ||
      header.e_shstrndx >= header.e_shnum) {
    return false;
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  const std::uint64_t tableSize = sizeof(Elf64_Shdr) * sections.size();
  if (!fits(header.e_shoff, tableSize) ||
      !readAt(file.get(), sections.data(), tableSize, header.e_shoff)) {
    return false;
  }
  const Elf64_Shdr& namesSection = sections[header.e_shstrndx];
  constexpr std::uint64_t kMaxNamesBytes = 1 << 16;
  if (namesSection.sh_size > kMaxNamesBytes ||
      !fits(namesSection.sh_offset, namesSection.sh_size)) {
    return false;
  }
  std::string names(namesSection.sh_size, '\0');
  if (!readAt(file.get(), names.data(), names.size(), namesSection.sh_offset)) return false;

  const std::string_view mark = defaultProgramMark();
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_name >= names.size()) continue;
    if (std::string_view(names.c_str() + section.sh_name) != kProgramMarkSection) continue;
    // The mark and its NUL, as the program's array holds it, at the start of the section (a
    // sanitizer build pads the array with a redzone after it).
    constexpr std::uint64_t kMaxMarkSection = 4096;
    if (section.sh_type != SHT_PROGBITS || section.sh_size < mark.size() + 1 ||
        section.sh_size > kMaxMarkSection || !fits(section.sh_offset, section.sh_size)) {
      return false;
    }
    std::string content(mark.size() + 1, '\1');
    return readAt(file.get(), content.data(), content.size(), section.sh_offset) &&
           std::string_view(content.data(), mark.size()) == mark && content.back() == '\0';
  }
  return false;
}

/// Whether the file at `path` holds exactly `expected`.
bool holdsExactly(const fs::path& path, std::string_view expected) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return false;
  const process::FileDescriptor file(fd);
  struct stat status {};
  if (::fstat(file.get(), &status) != 0 || !S_ISREG(status.st_mode) ||
      static_cast<std::uint64_t>(status.st_size) != expected.size()) {
    return false;
  }
  // One byte more than expected: a file that grew since fstat is not ours either.
  std::string content(expected.size() + 1, '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::read(file.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done == expected.size() && std::string_view(content.data(), done) == expected;
}

}  // namespace

bool isDefaultDiscoveryScript(const fs::path& script) noexcept {
  try {
    // The program itself (or a link to it, a copy of it), configured without its wrapper. The
    // wrapper is looked for first: its size alone (fstat) tells the program from it.
    if (!holdsExactly(script, defaultScriptText())) return isOurProgram(script);
    // The program the script would exec: beside $0 when executable there (`[ -x ]`), else
    // beside the file $0 links to. That one must be ours.
    fs::path program = script.parent_path() / kDefaultProgramName;
    if (::access(program.c_str(), X_OK) != 0) {
      std::error_code error;
      const fs::path real = fs::canonical(script, error);
      if (error) return false;
      program = real.parent_path() / kDefaultProgramName;
      if (::access(program.c_str(), X_OK) != 0) return false;
    }
    return isOurProgram(program);
  } catch (...) {  // std::bad_alloc from a path or the buffer
    return false;
  }
}

}  // namespace flink::defaultdiscovery
