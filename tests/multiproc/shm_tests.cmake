# Shared memory (transport/shm, engine/local): the one-host algorithms forced both ways,
# tiny staging slots (many chunks in flight), the schedule executor over shm links (with
# and without single-copy), transports mixed in one communicator, every pair over tcp,
# a mismatch, and a rank killed with SIGKILL.
function(kolo_shm_test name np scenario)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -E env ${ARGN} $<TARGET_FILE:kolorun> -np ${np} $<TARGET_FILE:kolo_test_worker> ${scenario})
  set_tests_properties(${name} PROPERTIES LABELS multiproc TIMEOUT 600 ENVIRONMENT "KOLO_TIMEOUT=60")
endfunction()

kolo_forced_test(shm_one_shot_np3 3 quick "allreduce of .*: local one_shot" KOLO_ALGO=one_shot)
kolo_forced_test(shm_two_shot_np5 5 quick "allreduce of .*: local two_shot" KOLO_ALGO=two_shot)
kolo_shm_test(shm_small_slots_np4 4 quick KOLO_SHM_CHUNK_BYTES=4096)
kolo_forced_test(shm_links_ring_np3 3 quick "allreduce of .*: schedule ring" KOLO_ALGO=ring)
kolo_forced_test(shm_links_ring_no_single_copy_np4 4 quick "allreduce of .*: schedule ring"
                 KOLO_ALGO=ring KOLO_SHM_SINGLE_COPY=0 KOLO_CHUNK_BYTES=300000)
kolo_shm_test(shm_p2p_no_single_copy_np3 3 p2p KOLO_SHM_SINGLE_COPY=0)
kolo_shm_test(mixed_transports_np3 3 quick KOLO_TEST_TCP_RANKS=1)
kolo_shm_test(mixed_transports_np5 5 quick KOLO_TEST_TCP_RANKS=0,3)
kolo_forced_test(mixed_hosts_direct_np5 5 quick "allreduce of .*: schedule direct" KOLO_TEST_HOSTS=2 KOLO_ALGO=direct)
kolo_shm_test(all_tcp_np3 3 quick KOLO_TRANSPORTS=tcp)
# A broadcast root far ahead of a sleeping rank over tcp: memory stays bounded.
kolo_shm_test(tcp_root_runs_ahead_np3 3 runs_ahead KOLO_TRANSPORTS=tcp)
kolo_shm_test(shm_mismatch_np3 3 mismatch)
# Small messages (fast boxes) interleaved with the staging slots, and 9 ranks: more than
# one reduction pass takes (partial sums). A mismatch where one rank's call fits a box and
# the others' do not must end well before KOLO_TIMEOUT (60 s): the test's limit is 30 s.
kolo_forced_test(shm_small_messages_np2 2 small_messages
                 "allreduce of 4 B on 2 ranks: local one_shot, protocol fast_box, barrier shared_memory")
kolo_shm_test(shm_small_messages_np5 5 small_messages)
kolo_shm_test(shm_small_messages_mixed_np3 3 small_messages KOLO_TEST_TCP_RANKS=1)
# The small-call lane (engine/call_runner.h): repeated small allreduces run from their kept
# plans; two ranks (which must log that the lane ran) and five (oversubscribed), and a
# mismatch between two armed keys.
kolo_forced_test(shm_small_lane_np2 2 small_lane "ran: small-call lane, allreduce")
kolo_shm_test(shm_small_lane_np5 5 small_lane)
kolo_shm_test(shm_mismatch_on_lane_np2 2 mismatch_on_lane)
kolo_shm_test(shm_quick_np9 9 quick)
# Every output of the staging-slot path written with non-temporal stores (normally from
# half the last-level cache on), and a bad value of the variable refused at init.
kolo_shm_test(shm_streamed_outputs_np3 3 collectives KOLO_SHM_STREAM_BYTES=1)
add_test(NAME shm_stream_bytes_bad_value_refused
         COMMAND ${CMAKE_COMMAND} -E env KOLO_SHM_STREAM_BYTES=lots
                 $<TARGET_FILE:kolorun> -np 2 $<TARGET_FILE:kolo_test_worker> quick)
set_tests_properties(shm_stream_bytes_bad_value_refused PROPERTIES LABELS multiproc TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "KOLO_SHM_STREAM_BYTES")
kolo_shm_test(shm_mismatch_paths_np3 3 mismatch_paths)
kolo_shm_test(shm_mismatch_root_runs_on_np3 3 mismatch_root_runs_on)
# Compressed allreduce of host buffers on one host, one-shot and two-shot, 1-5 ranks; ranks
# asking for different wire types; across hosts still refused (tcp).
kolo_shm_test(shm_compressed_np2 2 compressed)
kolo_forced_test(shm_compressed_one_shot_np3 3 compressed "allreduce of .*: local one_shot" KOLO_ALGO=one_shot)
kolo_forced_test(shm_compressed_two_shot_np5 5 compressed "allreduce of .*: local two_shot" KOLO_ALGO=two_shot)
kolo_forced_test(shm_compressed_small_slots_np4 4 compressed "allreduce of .*: local two_shot" KOLO_ALGO=two_shot
                 KOLO_SHM_CHUNK_BYTES=4096)
kolo_shm_test(shm_mismatch_wire_np3 3 mismatch_wire)
# Compressed reduce_scatter and allgather (the two-shot's phases alone), 1-5 ranks.
kolo_shm_test(shm_compressed_scatter_gather_np1 1 compressed_scatter_gather)
kolo_forced_test(shm_compressed_scatter_gather_np2 2 compressed_scatter_gather "reduce_scatter of .*: local")
kolo_forced_test(shm_compressed_scatter_gather_np3 3 compressed_scatter_gather "allgather of .*: local")
kolo_forced_test(shm_compressed_scatter_gather_small_slots_np5 5 compressed_scatter_gather "reduce_scatter of .*: local"
                 KOLO_SHM_CHUNK_BYTES=4096)
set_tests_properties(shm_mismatch_paths_np3 shm_mismatch_root_runs_on_np3 shm_mismatch_on_lane_np2 PROPERTIES TIMEOUT 30)
# One rank bound to a single CPU, the others not: the one-shot/two-shot choice must agree.
kolo_shm_test(shm_uneven_cpus_np3 3 reduction_sizes KOLO_TEST_ONE_CPU_RANKS=0)
kolo_shm_test(shm_uneven_cpus_np4 4 reduction_sizes KOLO_TEST_ONE_CPU_RANKS=1,2)
# A group of 64 in-place allreduces of mixed sizes: one combined schedule over the links
# (a receive done by single copy must get its acknowledgement out before the rank stops).
kolo_shm_test(shm_group_np2 2 group)
kolo_shm_test(shm_group_np4 4 group)
kolo_shm_test(shm_group_no_single_copy_np3 3 group KOLO_SHM_SINGLE_COPY=0)
kolo_shm_test(tcp_group_np3 3 group KOLO_TRANSPORTS=tcp)

add_test(NAME fault_shm_rank_killed_mid_allreduce
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/shm_kill_test.sh $<TARGET_FILE:kolo_test_worker>)
set_tests_properties(fault_shm_rank_killed_mid_allreduce PROPERTIES LABELS "multiproc;fault" TIMEOUT 180)

# Bad KOLO_TRANSPORTS values are refused at kolo_init with a message that names them.
add_test(NAME transports_unknown_name_refused
         COMMAND ${CMAKE_COMMAND} -E env KOLO_TRANSPORTS=shm,carrier-pigeon
                 $<TARGET_FILE:kolorun> -np 2 $<TARGET_FILE:kolo_test_worker> quick)
set_tests_properties(transports_unknown_name_refused PROPERTIES LABELS multiproc TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "KOLO_TRANSPORTS='shm,carrier-pigeon' is not a comma-separated list of shm, tcp, ucx \\('carrier-pigeon' is not one of them\\)")
add_test(NAME transports_shm_only_across_hosts_refused
         COMMAND ${CMAKE_COMMAND} -E env KOLO_TRANSPORTS=shm KOLO_TEST_HOSTS=2
                 $<TARGET_FILE:kolorun> -np 4 $<TARGET_FILE:kolo_test_worker> quick)
set_tests_properties(transports_shm_only_across_hosts_refused PROPERTIES LABELS multiproc TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "allows no transport to ranks (0,1|2,3)")
add_test(NAME shm_single_copy_bad_value_refused
         COMMAND ${CMAKE_COMMAND} -E env KOLO_SHM_SINGLE_COPY=yes
                 $<TARGET_FILE:kolorun> -np 2 $<TARGET_FILE:kolo_test_worker> quick)
set_tests_properties(shm_single_copy_bad_value_refused PROPERTIES LABELS multiproc TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "KOLO_SHM_SINGLE_COPY='yes' is not 0 or 1")
# Compressed allreduce across (emulated) hosts and over links: the compressed executor
# (encoded blocks over the links, each contribution encoded once), same bound and same
# bits on every rank; shm within hosts and tcp between, all-tcp, and 3 hosts of uneven size.
kolo_forced_test(compressed_two_hosts_np2 2 compressed "allreduce of .*: compressed two_shot" KOLO_TEST_HOSTS=2)
kolo_forced_test(compressed_two_hosts_np4 4 compressed "allreduce of .*: compressed two_shot" KOLO_TEST_HOSTS=2)
kolo_forced_test(compressed_three_hosts_np5 5 compressed "allreduce of .*: compressed two_shot" KOLO_TEST_HOSTS=3)
kolo_forced_test(compressed_all_tcp_np3 3 compressed "allreduce of .*: compressed two_shot" KOLO_TRANSPORTS=tcp)
# The hierarchical form (fp32 in each host, compressed between hosts), forced: 2 x 2 and
# 3 x 2 ranks; the flat two-shot forced on 2 x 2.
kolo_forced_test(compressed_hierarchical_two_hosts_np4 4 compressed "allreduce of .*: compressed hierarchical"
                 KOLO_TEST_HOSTS=2 KOLO_ALGO=hierarchical)
kolo_forced_test(compressed_hierarchical_three_hosts_np6 6 compressed "allreduce of .*: compressed hierarchical"
                 KOLO_TEST_HOSTS=3 KOLO_ALGO=hierarchical)
kolo_forced_test(compressed_flat_two_hosts_np4 4 compressed "allreduce of .*: compressed two_shot"
                 KOLO_TEST_HOSTS=2 KOLO_ALGO=two_shot)
# Mixed transports (one rank over tcp): the compressed executor over shm and tcp links.
kolo_forced_test(compressed_mixed_transports_np3 3 compressed "allreduce of .*: compressed" KOLO_TEST_TCP_RANKS=1)
kolo_forced_test(compressed_scatter_gather_mixed_transports_np4 4 compressed_scatter_gather
                 "reduce_scatter of .*: compressed" KOLO_TEST_TCP_RANKS=0,2)
# Overflow, NaN and inf through every compressed path, the same bits on every rank.
kolo_shm_test(shm_compressed_special_values_np3 3 compressed_special_values)
kolo_forced_test(shm_compressed_special_values_one_shot_np2 2 compressed_special_values
                 "allreduce of .*: local one_shot" KOLO_ALGO=one_shot)
kolo_forced_test(compressed_special_values_hierarchical_np4 4 compressed_special_values
                 "allreduce of .*: compressed hierarchical" KOLO_TEST_HOSTS=2 KOLO_ALGO=hierarchical)
kolo_forced_test(compressed_special_values_flat_np3 3 compressed_special_values
                 "allreduce of .*: compressed two_shot" KOLO_TRANSPORTS=tcp)
kolo_forced_test(compressed_scatter_gather_two_hosts_np4 4 compressed_scatter_gather
                 "reduce_scatter of .*: compressed two_shot" KOLO_TEST_HOSTS=2)
kolo_forced_test(compressed_scatter_gather_three_hosts_np5 5 compressed_scatter_gather
                 "allgather of .*: compressed two_shot" KOLO_TEST_HOSTS=3)
kolo_forced_test(compressed_scatter_gather_all_tcp_np2 2 compressed_scatter_gather
                 "allgather of .*: compressed two_shot" KOLO_TRANSPORTS=tcp)
