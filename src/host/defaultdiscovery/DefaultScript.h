// Knowing this project's default discovery script when a driver is configured with it, so that
// the driver can do the script's work itself (GPUDriver's in-process mode) and start no process.
#pragma once

#include <filesystem>
#include <string_view>

namespace flink::defaultdiscovery {

/// The file name of the default discovery script, and of the program it execs.
inline constexpr std::string_view kDefaultScriptName = "nvidia-gpu-discovery.sh";
inline constexpr std::string_view kDefaultProgramName = "nvidia-gpu-discovery";

/// The bytes of plugins/external-resource-gpu/nvidia-gpu-discovery.sh as this library was built
/// with them.
std::string_view defaultScriptText() noexcept;

/// The ELF section of the nvidia-gpu-discovery program that holds its mark, and the mark of the
/// program built with this library ("flink-gpu nvidia-gpu-discovery <version>"): what tells our
/// program from a wrapper, another program, or another release of ours, without running it.
inline constexpr std::string_view kProgramMarkSection = ".flink_gpu_program";
std::string_view defaultProgramMark() noexcept;

/// Whether `script` is this project's default discovery, so that what it would do can be done
/// in-process: either the program itself (the file, or the one the path links to, is a regular
/// ELF file whose kProgramMarkSection holds defaultProgramMark(): what a configuration that
/// names the program rather than its wrapper runs), or the wrapper script, whose content is,
/// byte for byte, defaultScriptText(), and the program it would exec — kDefaultProgramName
/// beside the path if that is executable, else beside the file the path links to, as the script
/// looks for it — is ours. The name does not count: a script of one's own named
/// nvidia-gpu-discovery.sh is not ours, nor an older or edited copy of ours, nor ours beside a
/// program of one's own (a wrapper) or of another release, nor ours without its program (which
/// fails as a script, with its own message). Reads at most one byte more than the script's
/// length, and of a program its ELF header, section headers, section names and the mark. Never
/// throws; an unreadable file is not ours.
bool isDefaultDiscoveryScript(const std::filesystem::path& script) noexcept;

}  // namespace flink::defaultdiscovery
