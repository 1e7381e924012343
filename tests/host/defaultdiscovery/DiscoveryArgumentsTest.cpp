// The command line of nvidia-gpu-discovery: Flink's arguments, ours, and tolerance of the rest.
#include "host/defaultdiscovery/DiscoveryArguments.h"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/coordination/Coordination.h"
#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/enumeration/GpuEnumerator.h"

namespace flink::defaultdiscovery {
namespace {

using discovery::DiscoveryError;
using discovery::parseGpuList;
using Args = std::vector<std::string>;

std::string errorOf(const Args& args) {
  try {
    parseDiscoveryArguments(args);
  } catch (const DiscoveryError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DiscoveryArguments, AmountOnly) {
  const DiscoveryArguments parsed = parseDiscoveryArguments({"2"});
  EXPECT_EQ(parsed.amount, 2u);
  EXPECT_EQ(parsed.amountText, "2");
  EXPECT_FALSE(parsed.coordination);
  EXPECT_EQ(parsed.coordinationFile.path, coordination::kDefaultCoordinationFile);
  EXPECT_FALSE(parsed.gpus);
  EXPECT_FALSE(parsed.ownerPid);
  EXPECT_FALSE(parsed.mig);
  EXPECT_TRUE(parsed.notes.empty());
}

TEST(DiscoveryArguments, HelpOnlyAsTheFirstArgument) {
  EXPECT_TRUE(asksForUsage({"--help"}));
  EXPECT_TRUE(asksForUsage({"-h"}));
  EXPECT_TRUE(asksForUsage({"--help", "2"}));
  // After the amount, where Flink puts it, an argument like any other.
  EXPECT_FALSE(asksForUsage({"1", "--help"}));
  EXPECT_FALSE(asksForUsage({}));
  EXPECT_FALSE(asksForUsage({"--HELP"}));
}

TEST(DiscoveryArguments, TheUsageListsEveryOptionItReads) {
  const std::string nvidia = discoveryUsage("nvidia-gpu-discovery.sh", discovery::Vendor::kNvidia);
  EXPECT_TRUE(nvidia.starts_with("Usage: nvidia-gpu-discovery.sh AMOUNT [OPTIONS]\n")) << nvidia;
  for (const char* option :
       {"--enable-coordination-mode", "--enable-coordination", "--coordination-file PATH",
        "--gpus LIST", "--owner-pid PID", "--mig", "--placement topology|index",
        "--health skip|warn|ignore", "--share", "--share-placement pack|spread", "-h, --help",
        "$FLINK_GPU_COORDINATION_FILE", coordination::kDefaultCoordinationFile}) {
    EXPECT_NE(nvidia.find(option), std::string::npos) << option << "\n" << nvidia;
  }
  // Every option the usage lists is one the parser takes.
  for (const Args& args : std::vector<Args>{
           {"1", "--enable-coordination-mode", "--share", "--share-placement", "spread"},
           {"1", "--enable-coordination", "--coordination-file", "/tmp/c", "--gpus", "0",
            "--owner-pid", "1", "--mig", "--placement", "index", "--health", "warn", "--select",
            "mig=yes"}}) {
    EXPECT_EQ(errorOf(args), "(no error)");
    EXPECT_TRUE(parseDiscoveryArguments(args).notes.empty());
  }
  const std::string amd = discoveryUsage("amd-gpu-discovery.sh", discovery::Vendor::kAmd);
  EXPECT_TRUE(amd.starts_with("Usage: amd-gpu-discovery.sh AMOUNT [OPTIONS]\n")) << amd;
  EXPECT_NE(amd.find("AMD GPUs"), std::string::npos) << amd;
  EXPECT_EQ(amd.find("--gpus LIST"), std::string::npos) << amd;
  EXPECT_NE(amd.find("--gpus, --mig, --share and --select are NVIDIA's"), std::string::npos) << amd;
}

TEST(DiscoveryArguments, MigIsAFlagBesideTheOthers) {
  const DiscoveryArguments parsed =
      parseDiscoveryArguments({"2", "--mig", "--enable-coordination-mode", "null"});
  EXPECT_TRUE(parsed.mig);
  EXPECT_TRUE(parsed.coordination);
  EXPECT_EQ(parsed.amount, 2u);
  EXPECT_TRUE(parsed.notes.empty());
  // A flag takes no value: what follows is read on its own.
  const DiscoveryArguments followed = parseDiscoveryArguments({"1", "--mig", "--gpus", "0"});
  EXPECT_TRUE(followed.mig);
  EXPECT_EQ(followed.gpus, std::vector<std::string>{"0"});
  // Other spellings of it are errors (see MisspeltOptionsAreErrors): ignored, they would hand
  // out whole GPUs where MIG instances were asked for.
  EXPECT_EQ(errorOf({"1", "--mig=yes"}), "unknown option '--mig=yes': '--mig' takes no value");
  EXPECT_EQ(errorOf({"1", "--MIG"}), "unknown option '--MIG': did you mean '--mig'?");
}

TEST(DiscoveryArguments, MisspeltOptionsAreErrors) {
  // Within two edits of a long name, one of a name of up to seven letters, case aside.
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"1", "--coordination-fle", "/tmp/c"}, "--coordination-file"},
      {{"1", "--enable-coordination-mod"}, "--enable-coordination-mode"},
      {{"1", "--enable-cordination"}, "--enable-coordination"},
      {{"1", "--Enable-Coordination-Mode"}, "--enable-coordination-mode"},
      {{"1", "--owner-id", "12"}, "--owner-pid"},
      {{"1", "--palcement", "index"}, "--placement"},  // two letters swapped: one edit
      {{"1", "--placements=index"}, "--placement"},
      {{"1", "--gpu", "0,1"}, "--gpus"},
      {{"1", "--helth", "warn"}, "--health"},
      {{"1", "--mig", "--enable-coordination-mode", "--coordination_file=/tmp/c"},
       "--coordination-file"},
  };
  for (const auto& [args, known] : cases) {
    const std::string misspelt = args[1] == "--mig" ? args[3] : args[1];
    try {
      parseDiscoveryArguments(args);
      ADD_FAILURE() << "accepted " << misspelt;
    } catch (const DiscoveryError& e) {
      // The whole argument, value included, as it was given.
      EXPECT_EQ(std::string(e.what()),
                "unknown option '" + misspelt + "': did you mean '" + known + "'?");
      ASSERT_EQ(e.details().size(), 1u);
      EXPECT_THAT(e.details()[0], ::testing::StartsWith("the default discovery's options: "));
      EXPECT_THAT(e.details()[0], ::testing::HasSubstr("--coordination-file PATH"));
    }
  }
  // A flag given a value would otherwise be ignored, and the flag with it.
  EXPECT_EQ(errorOf({"1", "--enable-coordination-mode=true"}),
            "unknown option '--enable-coordination-mode=true': '--enable-coordination-mode' "
            "takes no value");
  EXPECT_EQ(errorOf({"1", "--enable-coordination=yes"}),
            "unknown option '--enable-coordination=yes': '--enable-coordination' takes no value");
  // Quoted as messages quote: one line whatever the argument holds.
  EXPECT_EQ(errorOf({"1", "--helth=\nwarn"}),
            "unknown option '--helth=\\nwarn': did you mean '--health'?");
}

TEST(DiscoveryArguments, ArgumentsThatLookLikeNoOptionOfOursAreNotes) {
  // Further than the rule allows, or not an option at all: another script's arguments.
  const Args args = {
      "1",      "--device-type", "nvidia",         "--min", "--mix", "--big",
      "--mg",   "-gpus",         "--cpu",          "--",    "--=x",  "--coordination-file-path",
      "--json", "gpus",          "--gpus-per-node"};
  const DiscoveryArguments parsed = parseDiscoveryArguments(args);
  ASSERT_EQ(parsed.notes.size(), args.size() - 1);
  for (std::size_t i = 1; i < args.size(); ++i) {
    EXPECT_EQ(parsed.notes[i - 1], Notice::note("ignoring unknown argument '" + args[i] + "'"));
  }
  EXPECT_FALSE(parsed.mig);
  EXPECT_FALSE(parsed.coordination);
}

TEST(DiscoveryArguments, HealthIsSkipUnlessSaidOtherwise) {
  EXPECT_EQ(parseDiscoveryArguments({"1"}).health, health::HealthMode::kSkip);
  EXPECT_EQ(parseDiscoveryArguments({"1", "--health", "warn"}).health, health::HealthMode::kWarn);
  EXPECT_EQ(parseDiscoveryArguments({"1", "--health=ignore", "--mig"}).health,
            health::HealthMode::kIgnore);
  // Our own option: a wrong value is an error, never a silent default.
  EXPECT_EQ(errorOf({"1", "--health", "maybe"}),
            "--health needs skip, warn or ignore, not 'maybe'");
  EXPECT_EQ(errorOf({"1", "--health"}), "--health needs skip, warn or ignore");
}

TEST(DiscoveryArguments, AmountLosesLeadingZerosAndSaturates) {
  EXPECT_EQ(parseDiscoveryArguments({"007"}).amountText, "7");
  EXPECT_EQ(parseDiscoveryArguments({"007"}).amount, 7u);
  const DiscoveryArguments huge = parseDiscoveryArguments({"99999999999999999999999"});
  EXPECT_EQ(huge.amount, std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(huge.amountText, "99999999999999999999999");
}

TEST(DiscoveryArguments, InvalidAmounts) {
  for (const std::string amount : {"0", "000", "-1", "two", "1.5", "", "+1", " 1"}) {
    EXPECT_EQ(errorOf({amount, "--enable-coordination-mode"}),
              "invalid amount '" + amount + "': expected a positive integer");
  }
  EXPECT_EQ(errorOf({}), "invalid amount '': expected a positive integer");
}

TEST(DiscoveryArguments, FlinksArguments) {
  for (const std::string flag : {"--enable-coordination-mode", "--enable-coordination"}) {
    const DiscoveryArguments parsed =
        parseDiscoveryArguments({"1", flag, "--coordination-file", "/tmp/c"});
    EXPECT_TRUE(parsed.coordination);
    EXPECT_EQ(parsed.coordinationFile.path, "/tmp/c");
    EXPECT_TRUE(parsed.notes.empty());
  }
  EXPECT_EQ(parseDiscoveryArguments({"1", "--coordination-file=/tmp/d"}).coordinationFile.path,
            "/tmp/d");
}

TEST(DiscoveryArguments, NullIsIgnoredSilentlyAndUnknownWithANote) {
  EXPECT_TRUE(parseDiscoveryArguments({"1", "null"}).notes.empty());
  const DiscoveryArguments parsed = parseDiscoveryArguments({"1", "--device-type", "nvidia"});
  EXPECT_EQ(linesOf(parsed.notes),
            (std::vector<std::string>{"note: ignoring unknown argument '--device-type'",
                                      "note: ignoring unknown argument 'nvidia'"}));
  EXPECT_EQ(parsed.notes.front().kind, Notice::Kind::kNote);
}

TEST(DiscoveryArguments, CoordinationFileWithoutPathIsAnErrorNotTheHostsFile) {
  // Falling back to /var/tmp/flink-gpu-coordination would allocate in the host's real file when
  // another one was meant.
  for (const auto& args : {std::vector<std::string>{"1", "--coordination-file"},
                           std::vector<std::string>{"1", "--coordination-file="}}) {
    try {
      parseDiscoveryArguments(args);
      ADD_FAILURE() << "accepted " << args.back();
    } catch (const DiscoveryError& e) {
      EXPECT_NE(std::string(e.what()).find("--coordination-file needs a path"), std::string::npos);
    }
  }
}

TEST(DiscoveryArguments, TheVariableNamesTheFileWhenTheOptionDoesNot) {
  const testing::ScopedEnvironment variable(coordination::kCoordinationFileVariable, "/tmp/v");
  const DiscoveryArguments fromVariable =
      parseDiscoveryArguments({"1", "--enable-coordination-mode"});
  EXPECT_EQ(fromVariable.coordinationFile.path, "/tmp/v");
  EXPECT_EQ(fromVariable.coordinationFile.source, coordination::CoordinationFileSource::kVariable);
  EXPECT_FALSE(fromVariable.coordinationFileOption);
  const DiscoveryArguments fromOption =
      parseDiscoveryArguments({"1", "--enable-coordination-mode", "--coordination-file", "/tmp/o"});
  EXPECT_EQ(fromOption.coordinationFile.path, "/tmp/o");
  EXPECT_EQ(fromOption.coordinationFile.source, coordination::CoordinationFileSource::kOption);
  EXPECT_EQ(fromOption.coordinationFileOption, "/tmp/o");
}

TEST(DiscoveryArguments, AnEmptyVariableIsAnErrorInCoordinationModeOnly) {
  const testing::ScopedEnvironment variable(coordination::kCoordinationFileVariable, "");
  try {
    parseDiscoveryArguments({"1", "--enable-coordination-mode"});
    ADD_FAILURE() << "an empty $FLINK_GPU_COORDINATION_FILE was taken";
  } catch (const DiscoveryError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("FLINK_GPU_COORDINATION_FILE is set but empty"));
  }
  EXPECT_EQ(parseDiscoveryArguments({"1"}).coordinationFile.path,
            coordination::kDefaultCoordinationFile);
}

TEST(DiscoveryArguments, GpusAndOwner) {
  const DiscoveryArguments parsed =
      parseDiscoveryArguments({"1", "--gpus", "0, 1\n2", "--owner-pid", "1234"});
  EXPECT_EQ(parsed.gpus, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(parsed.ownerPid, 1234);
  EXPECT_EQ(parseDiscoveryArguments({"1", "--gpus=3", "--owner-pid=5"}).ownerPid, 5);
}

TEST(DiscoveryArguments, BadValuesOfOurOptions) {
  EXPECT_EQ(errorOf({"1", "--gpus"}), "--gpus needs a list of GPUs, e.g. --gpus 0,1");
  EXPECT_EQ(errorOf({"1", "--gpus", " , "}), "no GPU given: the list of --gpus is empty");
  EXPECT_EQ(errorOf({"1", "--gpus", "0,gpu0"}),
            "invalid GPU 'gpu0' in --gpus: expected an index (e.g. 0) or a GPU-/MIG- UUID");
  EXPECT_EQ(errorOf({"1", "--owner-pid"}), "--owner-pid needs a process id");
  for (const std::string pid : {"0", "-1", "abc", "99999999999"}) {
    EXPECT_EQ(errorOf({"1", "--owner-pid", pid}),
              "invalid --owner-pid '" + pid + "': expected a process id (a positive integer)");
  }
}

TEST(DiscoveryArguments, PlacementIsTopologyUnlessIndexIsAsked) {
  EXPECT_EQ(parseDiscoveryArguments({"1"}).placement, placement::Policy::kTopology);
  EXPECT_EQ(parseDiscoveryArguments({"1", "--placement", "index"}).placement,
            placement::Policy::kIndex);
  EXPECT_EQ(parseDiscoveryArguments({"1", "--placement=topology"}).placement,
            placement::Policy::kTopology);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"1", "--placement", "best"}, {"1", "--placement"}}) {
    try {
      parseDiscoveryArguments(args);
      ADD_FAILURE() << "accepted " << args.back();
    } catch (const DiscoveryError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("expected topology or index"));
    }
  }
}

TEST(ParseGpuList, IdentifiersAndCanonicalIndices) {
  EXPECT_EQ(parseGpuList("007,GPU-6f2a3c1e-0b1d, MIG-0a1b 0"),
            (std::vector<std::string>{"7", "GPU-6f2a3c1e-0b1d", "MIG-0a1b", "0"}));
  EXPECT_TRUE(parseGpuList("").empty());
}

}  // namespace
}  // namespace flink::defaultdiscovery

namespace flink::defaultdiscovery {
namespace {

TEST(DiscoveryArguments, SelectTakesASelectorInEitherForm) {
  const DiscoveryArguments spaced =
      parseDiscoveryArguments({"1", "--enable-coordination-mode", "--select", "name~H100"});
  ASSERT_TRUE(spaced.select);
  EXPECT_EQ(spaced.select->text(), "name~H100");
  EXPECT_TRUE(spaced.notes.empty());
  const DiscoveryArguments joined =
      parseDiscoveryArguments({"2", "--select=mig=yes,memory.total>=40000", "--mig"});
  ASSERT_TRUE(joined.select);
  EXPECT_EQ(joined.select->terms().size(), 2u);
  EXPECT_FALSE(parseDiscoveryArguments({"1"}).select);
  // What the program's options give findHostUnits.
  EXPECT_EQ(hostUnitsOptionsFor(joined).select->text(), "mig=yes,memory.total>=40000");
}

TEST(DiscoveryArguments, ABadSelectorIsAnErrorThatQuotesIt) {
  EXPECT_EQ(errorOf({"1", "--select", "nme~H100"}),
            "--select: unknown key 'nme' in 'nme~H100'; the keys are name, uuid, pci.bus_id, "
            "memory.total, compute_capability, vendor, numa_node, mig");
  EXPECT_EQ(errorOf({"1", "--select"}),
            "--select needs terms KEY OP VALUE, e.g. --select name~H100; the keys are name, "
            "uuid, pci.bus_id, memory.total, compute_capability, vendor, numa_node, mig");
  EXPECT_THAT(errorOf({"1", "--select", "memory.total>=lots"}),
              ::testing::HasSubstr("not a number"));
  // A misspelling of it is one of ours, not an argument to ignore.
  EXPECT_EQ(errorOf({"1", "--selct", "name~H100"}),
            "unknown option '--selct': did you mean '--select'?");
}

TEST(DiscoveryArguments, SelectGivenTwiceIsAnErrorNamingBoth) {
  // Other options given twice keep the last; two selectors most likely meant both, and keeping
  // one would hand out GPUs the other rules out.
  const std::string expected =
      "--select given twice, 'name~L4' and 'name~H100': a selector's terms must all hold, so to "
      "ask for both join them with a comma: --select name~L4,name~H100";
  EXPECT_EQ(errorOf({"1", "--select", "name~L4", "--select", "name~H100"}), expected);
  EXPECT_EQ(errorOf({"1", "--select=name~L4", "--mig", "--select=name~H100"}), expected);
  // Still last-wins: an option whose repetition cannot mean more than one value.
  EXPECT_EQ(
      parseDiscoveryArguments({"1", "--placement", "topology", "--placement", "index"}).placement,
      placement::Policy::kIndex);
}

TEST(DiscoveryArguments, TheUsageShowsSelect) {
  EXPECT_THAT(discoveryUsage("nvidia-gpu-discovery.sh", discovery::Vendor::kNvidia),
              ::testing::HasSubstr("--select EXPR"));
}

}  // namespace
}  // namespace flink::defaultdiscovery
