// The two readers behind GlobalConfiguration::loadConfiguration, on text already in memory
// (not part of the public API; the tests and the fuzzer call them directly).
//
// The legacy reader has a source file of its own without the YAML library, so that the fuzzer
// can compile it with coverage instrumentation and nothing else.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/Configuration.h"

namespace flink {

/// Reads a legacy flink-conf.yaml the way Flink's GlobalConfiguration reads it, line by line and
/// not as YAML:
/// - a leading UTF-8 byte order mark is dropped;
/// - lines end at "\n", "\r\n" or a lone "\r" (Java's BufferedReader.readLine), numbered from 1;
/// - everything from the first '#' on is a comment, even inside a value;
/// - what is left is trimmed as Java's String.trim does (every byte up to ' ', control
///   characters included); a blank line is skipped;
/// - key and value are split at the first ": " (a colon followed by a space; "key:value" is not
///   a pair) and trimmed again;
/// - a line that is not a pair, or has an empty key or value, is skipped, and a later value for
///   a key wins over an earlier one. Each of these adds a warning (Flink only logs them):
///   "<fileName>:<line>: <why>, line skipped", or for a repeated key
///   "<fileName>:<line>: key '<key>' repeats line <n>; the later value is used".
/// Values are kept as text ("gpu;fpga" stays "gpu;fpga"). Never throws for any input (beyond
/// std::bad_alloc); the warnings name keys but never values.
Configuration parseLegacyConfiguration(std::string_view text, const std::string& fileName,
                                       std::vector<std::string>& warnings);

/// Reads a standard-YAML config.yaml (Flink 1.19+'s format) with yaml-cpp:
/// - an empty document (or one with only comments, or `~`) is the empty configuration; any other
///   document root must be a map, and only one document is allowed;
/// - nested maps flatten with '.' ("a: {b: 1}" is a.b=1) and mix freely with dotted keys; an empty
///   map adds nothing;
/// - a scalar becomes the text Flink makes of it: a quoted one as written, a plain one as
///   SnakeYAML's YAML 1.1 resolution and Flink's convertToString give it (`True` → "true",
///   `0x10` → "16", `1.50` → "1.5", `10 s` as written; yamlvalues::plainScalarText);
/// - a sequence of scalars becomes its flow form, as Flink writes a list as text
///   (`[gpu, fpga]`, a string quoted where YAML needs it: `['*', '123']`; an empty one `[]`),
///   which a list option reads back as the same elements (detail::parseStandardYamlList).
/// - anchors and aliases are expanded (each use of an alias in full); a plain merge key
///   (`<<: *base`, or `<<: [*a, *b]`) adds the entries of the map(s) it is given whose keys the
///   map does not set itself, an earlier map winning over a later one (YAML 1.1's merge type; a
///   quoted '<<' is an ordinary key).
/// - the flattening is bounded as it goes, so that an alias bomb fails fast: at most 100,000
///   keys, 200,000 map entries and list elements visited, 16 MiB of key and value text, maps
///   nested 64 deep and merge keys nested 64 deep.
/// @throws IllegalConfigurationException "<fileName>:<line>: ..." (lines from 1) naming the key
///         for: a null value (`key:` or `key: ~`), a null or empty key, a key that is not a
///         scalar, a list that holds a map, a list or a null, a key set twice once flattened
///         ("a.b: 1" beside "a: {b: 2}", or a key repeated in one map), a root that is not a map,
///         a second document, a merge key given something other than a map or a list of maps,
///         nesting past a limit ("key '<key>' is nested more than 64 maps deep", "the merge key
///         '<<' under '<key>' nests merges more than 64 deep"), a configuration past a size limit
///         ("the configuration is too large once flattened (at key '<key>'): more than ...", on
///         the line of the root entry being flattened); "<fileName>:<line>:<column>: <yaml-cpp's
///         message>" for a YAML syntax error; "<fileName>:<line>:<column>: the quoted value of
///         key '<key>' is never closed (a ' is missing)." (or "a quoted key [under '<key>']",
///         "a quoted element of the list of key '<key>'") for a quoted scalar left open at the
///         end of the input, which yaml-cpp itself accepts (not checked in UTF-16 or UTF-32
///         input, where yaml-cpp's positions are not offsets into `text`).
Configuration parseStandardYamlConfiguration(std::string_view text, const std::string& fileName);

}  // namespace flink
