// --select: each key and operator against units that know it and units that do not, and each
// form of error, with the words that say what to write instead.
#include "host/enumeration/UnitSelector.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/Vendor.h"

namespace flink::discovery {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GpuDevice gpu(const std::string& index, const char* name, std::uint64_t mib, unsigned major,
              unsigned minor, unsigned numa, const char* bus) {
  GpuDevice device;
  device.identifier = index;
  device.uuid = "GPU-b000000" + index + "-1111-4222-8333-444400000000";
  device.name = name;
  device.memoryTotalMiB = mib;
  device.computeCapability = ComputeCapability{major, minor};
  device.numaNode = numa;
  device.pciBusId = bus;
  return device;
}

GpuDevice instance(const char* uuid, const char* name, std::uint64_t mib) {
  GpuDevice device = gpu("3", "", 0, 9, 0, 1, "00000000:C1:00.0");
  device.identifier = uuid;
  device.uuid = uuid;
  device.name = name;
  device.memoryTotalMiB = mib;
  device.mig = MigPlacement{3, 9, 0};
  return device;
}

/// As nvidia-smi lists a GPU: no compute capability, no NUMA node.
GpuDevice smiGpu(const std::string& index, const char* name) {
  GpuDevice device;
  device.identifier = index;
  device.name = name;
  device.memoryTotalMiB = 81559;
  return device;
}

std::vector<GpuDevice> mixedHost() {
  return {gpu("0", "NVIDIA L4", 23034, 8, 9, 0, "00000000:01:00.0"),
          gpu("1", "NVIDIA L4", 23034, 8, 9, 0, "00000000:02:00.0"),
          gpu("2", "NVIDIA H100 80GB HBM3", 81559, 9, 0, 1, "00000000:41:00.0"),
          instance("MIG-a", "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40192),
          instance("MIG-b", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 9856)};
}

std::vector<std::string> selected(const std::string& text,
                                  std::vector<GpuDevice> units = mixedHost()) {
  return identifiersOf(selectUnits(UnitSelector::parse(text), std::move(units)).units);
}

std::string errorOf(const std::string& text) {
  try {
    UnitSelector::parse(text);
  } catch (const SelectorError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(UnitSelector, NameContainsIgnoringCase) {
  EXPECT_THAT(selected("name~H100"), ElementsAre("2", "MIG-a", "MIG-b"));
  EXPECT_THAT(selected("name~h100"), ElementsAre("2", "MIG-a", "MIG-b"));
  EXPECT_THAT(selected("name~l4"), ElementsAre("0", "1"));
  EXPECT_THAT(selected("name=NVIDIA L4"), ElementsAre("0", "1"));
  // = is exact: case counts for names.
  EXPECT_THAT(selected("name=nvidia l4"), ElementsAre());
  EXPECT_THAT(selected("name!=NVIDIA L4"), ElementsAre("2", "MIG-a", "MIG-b"));
}

TEST(UnitSelector, MigUnitsByKindNameAndMemory) {
  EXPECT_THAT(selected("mig=yes"), ElementsAre("MIG-a", "MIG-b"));
  EXPECT_THAT(selected("mig=no"), ElementsAre("0", "1", "2"));
  EXPECT_THAT(selected("mig!=no"), ElementsAre("MIG-a", "MIG-b"));
  EXPECT_THAT(selected("mig=yes,name~1g"), ElementsAre("MIG-b"));
  EXPECT_THAT(selected("mig=yes,memory.total>=20000"), ElementsAre("MIG-a"));
  // An instance has its GPU's compute capability and NUMA node.
  EXPECT_THAT(selected("compute_capability=9.0,numa_node=1"), ElementsAre("2", "MIG-a", "MIG-b"));
}

TEST(UnitSelector, NumbersCompareAsNumbers) {
  EXPECT_THAT(selected("memory.total>=40000"), ElementsAre("2", "MIG-a"));
  EXPECT_THAT(selected("memory.total>40192"), ElementsAre("2"));
  EXPECT_THAT(selected("memory.total<23035"), ElementsAre("0", "1", "MIG-b"));
  EXPECT_THAT(selected("memory.total<=9856"), ElementsAre("MIG-b"));
  EXPECT_THAT(selected("memory.total=23034"), ElementsAre("0", "1"));
  EXPECT_THAT(selected("numa_node!=1"), ElementsAre("0", "1"));
}

TEST(UnitSelector, ComputeCapabilitiesCompareAsVersions) {
  EXPECT_THAT(selected("compute_capability>=9.0"), ElementsAre("2", "MIG-a", "MIG-b"));
  EXPECT_THAT(selected("compute_capability<9.0"), ElementsAre("0", "1"));
  EXPECT_THAT(selected("compute_capability>8.9"), ElementsAre("2", "MIG-a", "MIG-b"));
  std::vector<GpuDevice> units{gpu("0", "NVIDIA B200", 1, 10, 0, 0, "00000000:01:00.0"),
                               gpu("1", "NVIDIA H100", 1, 9, 0, 0, "00000000:02:00.0"),
                               gpu("2", "NVIDIA A100", 1, 8, 10, 0, "00000000:03:00.0")};
  // 10.0 > 9.0 (not as text), 8.10 > 8.9.
  EXPECT_THAT(selected("compute_capability>9.0", units), ElementsAre("0"));
  EXPECT_THAT(selected("compute_capability>8.9", units), ElementsAre("0", "1", "2"));
}

TEST(UnitSelector, UuidsAndBusIdsInAnySpelling) {
  EXPECT_THAT(selected("uuid=gpu-b0000002-1111-4222-8333-444400000000"), ElementsAre("2"));
  EXPECT_THAT(selected("uuid~B0000001"), ElementsAre("1"));
  // lspci's spelling, NVML's, lower case: one GPU.
  EXPECT_THAT(selected("pci.bus_id=0000:41:00.0"), ElementsAre("2"));
  EXPECT_THAT(selected("pci.bus_id=00000000:41:00.0"), ElementsAre("2"));
  EXPECT_THAT(selected("pci.bus_id=0000:c1:00.0,mig=yes"), ElementsAre("MIG-a", "MIG-b"));
  EXPECT_THAT(selected("pci.bus_id!=0000:41:00.0,mig=no"), ElementsAre("0", "1"));
  EXPECT_THAT(selected("pci.bus_id~:0"), ElementsAre("0", "1", "2", "MIG-a", "MIG-b"));
}

TEST(UnitSelector, Vendor) {
  EXPECT_THAT(selected("vendor=nvidia,mig=no"), ElementsAre("0", "1", "2"));
  EXPECT_THAT(selected("vendor=NVIDIA,mig=no"), ElementsAre("0", "1", "2"));
  EXPECT_THAT(selected("vendor!=nvidia"), ElementsAre());
  EXPECT_THAT(selected("vendor~nv,mig=no"), ElementsAre("0", "1", "2"));
  const UnitSelector amd = UnitSelector::parse("vendor=amd");
  EXPECT_TRUE(
      amd.matches(gpu("0", "AMD Instinct MI300X", 1, 9, 4, 0, "0000:05:00.0"), Vendor::kAmd));
  EXPECT_FALSE(amd.matches(gpu("0", "NVIDIA L4", 1, 8, 9, 0, "0000:05:00.0")));
}

TEST(UnitSelector, AKeyAUnitDoesNotKnowNeverMatchesAndIsNotedOnce) {
  std::vector<GpuDevice> units{smiGpu("0", "NVIDIA H100 80GB HBM3"),
                               smiGpu("1", "NVIDIA H100 80GB HBM3"), smiGpu("2", "NVIDIA L4")};
  const SelectedUnits kept =
      selectUnits(UnitSelector::parse("name~H100,compute_capability>=9.0"), units);
  EXPECT_TRUE(kept.units.empty());
  // GPU 2 is ruled out by its name: only those the unknown key alone keeps out are named.
  ASSERT_EQ(kept.notes.size(), 1u);
  EXPECT_EQ(kept.notes[0].kind, Notice::Kind::kNote);
  EXPECT_EQ(kept.notes[0].text,
            "--select: GPU 0, GPU 1 do not tell compute_capability, so "
            "compute_capability>=9.0 never matches them (NVML tells it; nvidia-smi and a --gpus "
            "list without NVML do not)");
  // != does not match an unknown value either.
  EXPECT_TRUE(selectUnits(UnitSelector::parse("numa_node!=3"), units).units.empty());
  // A long term is cut where the note quotes it.
  const std::string longTerm = "numa_node>=" + std::string(5000, '0');
  const SelectedUnits cut = selectUnits(UnitSelector::parse(longTerm), units);
  ASSERT_EQ(cut.notes.size(), 1u);
  EXPECT_LT(cut.notes[0].text.size(), 400u);
  EXPECT_THAT(cut.notes[0].text, HasSubstr("so numa_node>=000"));
  EXPECT_THAT(cut.notes[0].text, HasSubstr("... (4811 more bytes) never matches them"));
  // A key every unit knows: no note.
  EXPECT_TRUE(selectUnits(UnitSelector::parse("name~H100"), units).notes.empty());
}

TEST(UnitSelector, ErrorsQuoteTheTermAndSayWhatToWrite) {
  const std::string keys =
      "the keys are name, uuid, pci.bus_id, memory.total, compute_capability, vendor, "
      "numa_node, mig";
  EXPECT_EQ(errorOf("nme~H100"), "--select: unknown key 'nme' in 'nme~H100'; " + keys);
  EXPECT_EQ(errorOf("name"),
            "--select: 'name' has no operator: write KEY OP VALUE, e.g. name~H100; the operators "
            "are =, !=, ~ (contains, ignoring case), >=, <=, >, <");
  EXPECT_EQ(errorOf(""),
            "--select: no term given: write KEY OP VALUE terms separated by commas, "
            "e.g. name~H100; " +
                keys);
  EXPECT_THAT(errorOf("name~H100,"), HasSubstr("an empty term in 'name~H100,'"));
  EXPECT_THAT(errorOf("name~H100,,mig=no"), HasSubstr("an empty term"));
  EXPECT_THAT(errorOf("~H100"), HasSubstr("'~H100' has no key"));
  EXPECT_EQ(errorOf("name="), "--select: 'name=' has no value: write KEY OP VALUE, e.g. name~H100");
  EXPECT_EQ(errorOf("name==H100"),
            "--select: '==' in 'name==H100' is not an operator; the operators are =, !=, ~ "
            "(contains, ignoring case), >=, <=, >, <");
  EXPECT_THAT(errorOf("memory.total=>40000"), HasSubstr("'=>' in 'memory.total=>40000' is not"));
  EXPECT_THAT(errorOf("name!H100"), HasSubstr("'!' in 'name!H100' is not an operator"));
  EXPECT_EQ(errorOf("name>=H100"),
            "--select: '>=' in 'name>=H100' does not apply to name, a text: use =, != or ~");
  EXPECT_EQ(errorOf("memory.total~800"),
            "--select: '~' in 'memory.total~800' does not apply to memory.total, a number: use =, "
            "!=, >=, <=, > or <");
  EXPECT_EQ(errorOf("memory.total>=80GB"),
            "--select: '80GB' in 'memory.total>=80GB' is not a number: memory.total is in MiB, a "
            "whole number, e.g. memory.total>=40000");
  EXPECT_THAT(errorOf("numa_node=-1"), HasSubstr("'-1' in 'numa_node=-1' is not a number"));
  EXPECT_EQ(errorOf("mig=maybe"),
            "--select: 'maybe' in 'mig=maybe' is not yes or no: mig=yes keeps the MIG instances, "
            "mig=no the whole GPUs");
  EXPECT_THAT(errorOf("mig>yes"), HasSubstr("does not apply to mig, yes or no: use = or !="));
  for (const char* bad :
       {"compute_capability>=9", "compute_capability>=9.", "compute_capability=.9",
        "compute_capability=sm_90", "compute_capability=9.0.1"}) {
    EXPECT_THAT(errorOf(bad), HasSubstr("is not a compute capability: write MAJOR.MINOR, e.g. "
                                        "compute_capability>=8.9"))
        << bad;
  }
  EXPECT_THAT(errorOf("vendor=nv"), HasSubstr("'nv' in 'vendor=nv' is no vendor: write nvidia, "
                                              "amd or intel"));
  EXPECT_THAT(errorOf("pci.bus_id=41:00.0"), HasSubstr("is not a PCI bus id"));
  // The first bad term is the one named.
  EXPECT_THAT(errorOf("name~H100,mig=maybe,nme=x"), HasSubstr("'mig=maybe'"));
  // Keys ignore case; values of text keys are kept as written.
  EXPECT_EQ(errorOf("NAME~H100"), "(no error)");
}

TEST(UnitSelector, KnowsWhenOnlyMigInstancesMatch) {
  // What makes a shortfall without --mig say that MIG instances are units only with it.
  for (const char* only : {"mig=yes", "name~1g,mig=YES", "mig!=no"}) {
    EXPECT_TRUE(UnitSelector::parse(only).onlyMigInstances()) << only;
  }
  for (const char* whole : {"mig=no", "mig!=yes", "name~H100"}) {
    EXPECT_FALSE(UnitSelector::parse(whole).onlyMigInstances()) << whole;
  }
}

TEST(UnitSelector, SpacesAroundKeysAndValuesAreDropped) {
  // exec --select passes a selector whole: a space a shell kept must not end up in a value that
  // then matches nothing, unseen in the message that quotes it.
  EXPECT_THAT(selected("name~L4 "), ElementsAre("0", "1"));
  EXPECT_THAT(selected(" name ~ L4 , mig = no"), ElementsAre("0", "1"));
  EXPECT_THAT(selected("memory.total>= 40000"), ElementsAre("2", "MIG-a"));
  const UnitSelector selector = UnitSelector::parse(" name ~ L4 , mig=no ");
  EXPECT_EQ(selector.text(), "name ~ L4,mig=no");
  EXPECT_EQ(selector.terms()[0].value, "L4");
  // A space within a value is kept.
  EXPECT_THAT(selected("name=NVIDIA L4"), ElementsAre("0", "1"));
  EXPECT_THAT(errorOf("name~L4, "), HasSubstr("an empty term in 'name~L4, '"));
  EXPECT_THAT(errorOf(" "), HasSubstr("no term given"));
  EXPECT_EQ(errorOf("name~ "),
            "--select: 'name~' has no value: write KEY OP VALUE, e.g. name~H100");
  EXPECT_THAT(errorOf(" nme ~H100"), HasSubstr("unknown key 'nme' in 'nme ~H100'"));
}

TEST(UnitSelector, KeepsTheTextAndTerms) {
  const UnitSelector selector = UnitSelector::parse("name~H100,memory.total>=40000");
  EXPECT_EQ(selector.text(), "name~H100,memory.total>=40000");
  ASSERT_EQ(selector.terms().size(), 2u);
  EXPECT_EQ(selector.terms()[0].key, SelectorKey::kName);
  EXPECT_EQ(selector.terms()[0].op, SelectorOperator::kContains);
  EXPECT_EQ(selector.terms()[0].value, "H100");
  EXPECT_EQ(selector.terms()[1].key, SelectorKey::kMemoryTotal);
  EXPECT_EQ(selector.terms()[1].op, SelectorOperator::kGreaterOrEqual);
  EXPECT_EQ(selector.terms()[1].number, 40000u);
}

}  // namespace
}  // namespace flink::discovery
