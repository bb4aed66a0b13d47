# Multi-process tests of the Horovod-style runtime (engine/runtime/), included from
# CMakeLists.txt here. Real ranks started by kolorun, through the real bootstrap.
find_package(nlohmann_json 3 REQUIRED)
add_executable(kolo_runtime_worker runtime_worker.cc runtime_device_scenarios.cc)
# kolo_internal: the worker reads the runtime's counters (cache hits, fused tensors).
target_link_libraries(kolo_runtime_worker PRIVATE kolo_perf_cases kolo_internal nlohmann_json::nlohmann_json)

foreach(np 2 3 4 5)
  add_test(NAME runtime_random_order_np${np}
           COMMAND $<TARGET_FILE:kolorun> -np ${np} $<TARGET_FILE:kolo_runtime_worker> random_order)
  # A small threshold so that the 200 tensors make several fused groups.
  set_tests_properties(runtime_random_order_np${np} PROPERTIES LABELS multiproc TIMEOUT 300
                       ENVIRONMENT "KOLO_TIMEOUT=60;KOLO_FUSION_THRESHOLD=262144")
endforeach()
foreach(np 2 3)
  foreach(scenario mismatch join split callbacks)
    add_test(NAME runtime_${scenario}_np${np}
             COMMAND $<TARGET_FILE:kolorun> -np ${np} $<TARGET_FILE:kolo_runtime_worker> ${scenario})
    set_tests_properties(runtime_${scenario}_np${np} PROPERTIES LABELS multiproc TIMEOUT 120
                         ENVIRONMENT "KOLO_TIMEOUT=30")
  endforeach()
endforeach()
add_test(NAME runtime_stall_np3
         COMMAND $<TARGET_FILE:kolorun> -np 3 $<TARGET_FILE:kolo_runtime_worker> stall)
set_tests_properties(runtime_stall_np3 PROPERTIES LABELS multiproc TIMEOUT 120
                     ENVIRONMENT "KOLO_TIMEOUT=30;KOLO_STALL_CHECK_TIME=1;KOLO_STALL_SHUTDOWN_TIME=2")
add_test(NAME runtime_timeline_np2
         COMMAND $<TARGET_FILE:kolorun> -np 2 $<TARGET_FILE:kolo_runtime_worker> timeline)
set_tests_properties(runtime_timeline_np2 PROPERTIES LABELS multiproc TIMEOUT 120
                     ENVIRONMENT "KOLO_TIMEOUT=30;KOLO_TIMELINE=${CMAKE_CURRENT_BINARY_DIR}/runtime_timeline.json")
# A cached cycle must not wait for a background thread's tick: a long cycle time makes a
# tick-bound runtime miss the bound by far, while the bound leaves a loaded machine ample
# room (see scenario_cycle_wake).
foreach(np 2 4)
  add_test(NAME runtime_cycle_wake_np${np}
           COMMAND $<TARGET_FILE:kolorun> -np ${np} $<TARGET_FILE:kolo_runtime_worker> cycle_wake)
  set_tests_properties(runtime_cycle_wake_np${np} PROPERTIES LABELS multiproc TIMEOUT 180
                       ENVIRONMENT "KOLO_TIMEOUT=60;KOLO_CYCLE_TIME=1000")
endforeach()
# Device tensors on the emulated device: kernels over each other's memory (device_ipc),
# and staged through host memory (KOLO_DEVICE_IPC=0), with a small threshold so that
# fusion packs several groups.
foreach(np 1 2 3)
  add_test(NAME runtime_device_random_order_np${np}
           COMMAND $<TARGET_FILE:kolorun> -np ${np} $<TARGET_FILE:kolo_runtime_worker> device_random_order)
  set_tests_properties(runtime_device_random_order_np${np} PROPERTIES LABELS multiproc TIMEOUT 300
                       ENVIRONMENT "KOLO_DEVICE=emulated;KOLO_TIMEOUT=60;KOLO_FUSION_THRESHOLD=65536")
endforeach()
add_test(NAME runtime_device_random_order_staged_np2
         COMMAND $<TARGET_FILE:kolorun> -np 2 $<TARGET_FILE:kolo_runtime_worker> device_random_order)
set_tests_properties(runtime_device_random_order_staged_np2 PROPERTIES LABELS multiproc TIMEOUT 300
                     ENVIRONMENT "KOLO_DEVICE=emulated;KOLO_DEVICE_IPC=0;KOLO_TIMEOUT=60;KOLO_FUSION_THRESHOLD=65536")
# op=Adasum through the runtime, host tensors and emulated device tensors.
foreach(np 1 2 3 5)
  add_test(NAME runtime_adasum_np${np} COMMAND $<TARGET_FILE:kolorun> -np ${np} $<TARGET_FILE:kolo_runtime_worker> adasum)
  set_tests_properties(runtime_adasum_np${np} PROPERTIES LABELS multiproc TIMEOUT 120
                       ENVIRONMENT "KOLO_DEVICE=emulated;KOLO_TIMEOUT=30")
endforeach()
foreach(np 2 3)
  add_test(NAME runtime_wire_np${np} COMMAND $<TARGET_FILE:kolorun> -np ${np} $<TARGET_FILE:kolo_runtime_worker> wire)
  set_tests_properties(runtime_wire_np${np} PROPERTIES LABELS multiproc TIMEOUT 120
                       ENVIRONMENT "KOLO_TIMEOUT=30;KOLO_FUSION_THRESHOLD=16384")
endforeach()
# Across (emulated) hosts: the compressed executor over the links.
add_test(NAME runtime_wire_two_hosts_np4
         COMMAND $<TARGET_FILE:kolorun> -np 4 $<TARGET_FILE:kolo_runtime_worker> wire)
set_tests_properties(runtime_wire_two_hosts_np4 PROPERTIES LABELS multiproc TIMEOUT 120
                     ENVIRONMENT "KOLO_TIMEOUT=30;KOLO_FUSION_THRESHOLD=16384;KOLO_TEST_HOSTS=2")
