import json, os
allocation = json.load(open(os.environ["FLINK_GPU_ALLOCATION_FILE"]))
for unit in allocation["units"]:
    share = unit.get("share") or {}
    print(unit["index"], unit["uuid"], unit["memory.total"], share.get("memory_mib"))
