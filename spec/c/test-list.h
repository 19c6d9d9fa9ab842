/* test-list.h - every C API test, in the order the runner runs them.
 * Add a test here and define it with TEST_IMPL(name) in one of the
 * spec/c/test-*.c files. */
#ifndef LUDO_SPEC_TEST_LIST_H
#define LUDO_SPEC_TEST_LIST_H

#include "task.h"

#define TEST_LIST(X)                                                         \
  /* test-echo.c: the blocking path */                                       \
  X(echo_reset_step_state)                                                   \
  X(echo_reset_options)                                                      \
  X(echo_info_ids_and_data)                                                  \
  X(echo_skipped_rubrics_are_null)                                           \
  /* test-errors.c */                                                        \
  X(error_names)                                                             \
  X(error_parse)                                                             \
  X(error_schema_type)                                                       \
  X(error_schema_unknown_field)                                              \
  X(error_reset_options)                                                     \
  X(error_invalid_arguments)                                                 \
  X(error_env_missing)                                                       \
  X(error_env_syntax)                                                        \
  X(error_env_raises)                                                        \
  X(error_codes_not_spoofable)                                               \
  X(error_step_returns_nil)                                                  \
  X(error_message_with_nul)                                                  \
  /* test-async.c: the non-blocking path */                                  \
  X(async_not_synchronous)                                                   \
  X(async_poll_interleaves)                                                  \
  X(async_run_interleaves)                                                   \
  X(async_sleep_lasts)                                                       \
  X(async_script_waits)                                                      \
  X(async_ebusy)                                                             \
  X(async_chain_from_callback)                                               \
  X(async_close_in_flight)                                                   \
  X(async_close_from_callback)                                               \
  X(async_blocking_inside_callback)                                          \
  X(async_runtime_free_in_flight)                                            \
  /* test-scriptasync.c: ludo_script_call_async */                           \
  X(script_async_result_from_loop)                                           \
  X(script_async_wait_overlaps)                                              \
  X(script_async_errors)                                                     \
  X(script_call_arguments)                                                   \
  X(script_async_ebusy)                                                      \
  X(script_async_free_in_flight)                                             \
  X(script_blocking_wait_beside_host_handles)                                \
  /* test-core.c: loop ownership, run queue, lifecycle, re-entrancy */     \
  X(core_borrowed_loop)                                                      \
  X(core_one_runtime_per_loop)                                               \
  X(core_async_on_the_loop)                                                  \
  X(core_poll_budget_slices)                                                 \
  X(core_async_open_close)                                                   \
  X(core_pool_blocking_host)                                                 \
  X(core_free_with_pending_lifecycle)                                        \
  X(reenter_blocking_ebusy)                                                  \
  X(reenter_outer_budget)                                                    \
  X(reenter_inner_stopped_by_outer)                                          \
  X(reenter_close_self)                                                      \
  X(batch_blocking)                                                          \
  X(batch_blocking_refusals_named)                                           \
  X(batch_async)                                                             \
  /* test-abuse.c: cleanup paths and Lua defects */                        \
  X(abuse_close_after_error)                                                 \
  X(abuse_close_waits)                                                       \
  X(abuse_big_error_memory)                                                  \
  X(abuse_close_after_timeout)                                               \
  X(abuse_coroutine_close_paths)                                             \
  X(abuse_nested_close)                                                      \
  X(abuse_concat_stack)                                                      \
  X(abuse_close_session)                                                     \
  X(abuse_waits_bounded)                                                     \
  X(abuse_c_loops)                                                           \
  X(abuse_table_loops)                                                       \
  X(abuse_calls_from_c_loops)                                                \
  X(abuse_calls_from_c_counted)                                              \
  X(abuse_long_string_compares)                                              \
  X(abuse_encode_hollow)                                                     \
  X(abuse_close_stopped_coroutine)                                           \
  X(abuse_pcall_tree)                                                        \
  X(abuse_huge_error)                                                        \
  X(abuse_result_and_wait_messages)                                          \
  X(abuse_regex_bounds)                                                      \
  X(abuse_pattern_bounds)                                                    \
  X(abuse_no_addresses)                                                      \
  X(abuse_pointers_hidden)                                                   \
  X(abuse_failed_call_no_collect)                                            \
  X(abuse_emergency_collections)                                             \
  X(abuse_metamethods_at_slice_ends)                                         \
  X(abuse_decode_at_cap)                                                     \
  /* test-embedder.c */                                                     \
  X(embedder_batch_async_twice)                                              \
  X(embedder_json_parse)                                                     \
  X(embedder_batch_close_in_callback)                                        \
  X(embedder_batch_close_busy_entry)                                         \
  X(embedder_runtime_free_reentrant)                                         \
  X(embedder_runtime_free_leftovers)                                         \
  X(embedder_close_owed_callback_in_blocking)                                \
  X(embedder_close_while_blocking)                                           \
  X(embedder_script_free_reissue)                                            \
  X(embedder_free_refuses_new_work)                                          \
  X(embedder_wall_limit_while_running)                                       \
  X(embedder_slices_on_borrowed_loop)                                        \
  X(embedder_memory_cap_max)                                                 \
  X(embedder_env_host_modules_checked)                                       \
  X(embedder_self_close_after_wait_blocking)                                 \
  X(embedder_self_close_after_wait_batch)                                    \
  X(embedder_script_free_during_call)                                        \
  X(embedder_retired_states_reclaimed_by_run)                                \
  X(embedder_run_waits_for_owed_callbacks)                                   \
  X(embedder_close_async_callbacks_held_in_blocking)                         \
  X(embedder_open_callback_held_in_blocking)                                 \
  X(embedder_jansson_allocator_kept)                                         \
  X(embedder_batch_close_later_entry)                                        \
  X(embedder_close_async_self_in_blocking)                                   \
  X(embedder_free_callbacks_find_objects_alive)                              \
  X(embedder_collect_busy_while_queued)                                      \
  X(embedder_batch_toobig_message)                                           \
  /* test-wire.c */                                                         \
  X(wire_nested_metadata)                                                   \
  /* test-tools.c */                                                        \
  X(tools_listed_in_info)                                                   \
  X(tools_step_actions)                                                     \
  X(tools_step_errors)                                                      \
  X(tools_call_api)                                                         \
  X(tools_result_text)                                                      \
  X(tools_call_async)                                                       \
  X(tools_declaration_errors)                                               \
  /* test-tasks.c */                                                         \
  X(tasks_splits)                                                            \
  X(tasks_from_list)                                                         \
  X(tasks_range_slices)                                                      \
  X(tasks_from_get)                                                          \
  X(tasks_not_offered)                                                       \
  X(tasks_bad_requests)                                                      \
  X(tasks_misbehaving)                                                       \
  X(tasks_outside_episode)                                                   \
  X(tasks_reset_selects)                                                     \
  X(tasks_alloc_faults)                                                      \
  X(tasks_lua_alloc_faults)                                                  \
  X(tools_strict_session)                                                   \
  /* test-pattern.c */                                                      \
  X(pattern_same_as_library)                                                \
  X(pattern_cases)                                                          \
  /* test-tablewalk.c: lua_nextpos against lua_next */                    \
  X(tablewalk_same_as_lua_next)                                             \
  X(tablewalk_resized_while_walked)                                         \
  /* test-schema.c: compiling a declared schema, within limits */          \
  X(schema_compile_stops_and_bounds)                                         \
  X(schema_compile_refuses_deep_and_cut_refs)                                \
  /* test-arena.c: the per-state small-object arena */                     \
  X(arena_resizes_keep_contents)                                             \
  X(arena_reuse_and_limit)                                                   \
  X(arena_blocks_within_lines)                                               \
  X(arena_fast_paths_agree)                                                  \
  X(state_alloc_fast_path_limits)                                            \
  /* test-prefetch.c: a step's memory asked for ahead */                  \
  X(arena_first_chunks)                                                      \
  X(prefetch_ahead_same_results)                                             \
  X(arena_big_blocks)                                                        \
  X(prefetch_learned_order)                                                  \
  X(arena_learned_ranges)                                                    \
  X(arena_new_chunks_asked)                                                  \
  X(relearning_spread)                                                       \
  X(arena_learns_touched_lines)                                              \
  X(cache_probe_tells_lines_apart)                                           \
  X(cache_probe_list)                                                        \
  X(prefetch_learns_lines)                                                   \
  /* test-pages.c: the pages the arenas' chunks come from */               \
  X(pages_hand_out_aligned_pages)                                            \
  X(pages_given_back_first_and_spare)                                        \
  X(arena_chunks_from_pages)                                                 \
  X(pages_hold_runtime_chunks)                                               \
  X(pages_borrowed_loop_free)                                                \
  X(pages_next_region_asked_ahead)                                           \
  X(prefault_maps_next_region)                                               \
  X(prefault_runtime_regions)                                                \
  /* test-bytecode.c: trimmed debug information of library modules */     \
  X(bytecode_trim_keeps_lines)                                               \
  X(bytecode_trim_refuses_bad_chunks)                                        \
  /* test-host.c: host-registered functions */                               \
  X(host_function_ud_and_session)                                            \
  X(host_function_error)                                                     \
  X(host_module_missing)                                                     \
  X(host_session_from_foreign_state)                                         \
  X(host_runtime_module)                                                     \
  X(host_runtime_module_late)                                                \
  /* test-strict.c: observations checked against the schema */              \
  X(strict_observation_checked)                                              \
  X(strict_reset_after_transform)                                            \
  X(strict_per_session)                                                      \
  X(strict_undeclared_schema)                                                \
  X(strict_undeclared_names_shape)                                           \
  X(strict_plain_tables_agree)                                               \
  /* test-limits.c */                                                        \
  X(limit_cpu_loop)                                                          \
  X(limit_cpu_pcall_loop)                                                    \
  X(limit_cpu_async)                                                         \
  /* test-interrupt.c */                                                    \
  X(interrupt_from_a_thread)                                                 \
  X(interrupt_from_a_signal_handler)                                         \
  X(interrupt_async_call)                                                    \
  X(interrupt_script_call)                                                   \
  X(interrupt_queued_calls)                                                  \
  X(interrupt_when_idle_is_lost)                                             \
  X(interrupt_any_instant_is_canceled)                                       \
  X(limit_short_budgets_not_early)                                           \
  X(limit_memory_table)                                                      \
  X(limit_memory_string_rep)                                                 \
  X(limit_memory_concat)                                                     \
  X(limit_max_instructions)                                                  \
  X(limit_result_encoding)                                                   \
  X(limit_log_lines)                                                         \
  X(limit_input_size)                                                        \
  X(limit_script_input_size)                                                 \
  X(limit_wide_tables)                                                       \
  X(limit_reward_types)                                                      \
  X(limit_sizes_and_depths)                                                  \
  X(limit_schema_costs)                                                      \
  X(limit_compile_budget)                                                    \
  /* test-sources.c: the files require reads */                              \
  X(sources_require_confined)                                                \
  X(sources_env_and_script_confined)                                         \
  X(sources_env_file_not_regular)                                            \
  X(sources_read_under_the_cap)                                              \
  /* test-where.c: errors that say where and what */                       \
  X(where_tracebacks)                                                        \
  X(where_policy_traceback)                                                  \
  X(where_debug_levels)                                                      \
  X(where_traceback_names_from_calls)                                        \
  X(where_cpu_budget_phases)                                                 \
  X(where_instructions_phases)                                               \
  X(where_memory_phases)                                                     \
  X(where_wall_clock_phases)                                                 \
  X(where_async_rubric)                                                      \
  X(where_script_limits)                                                     \
  X(where_load_limits)                                                       \
  /* test-memory.c: accounting, allocator, pool */                           \
  X(stats_lua_bytes)                                                         \
  X(memory_settles_after_big_steps)                                          \
  X(alloc_all_returned)                                                      \
  X(alloc_fault_injection)                                                   \
  X(pool_prewarm)                                                            \
  X(gc_states_not_in_lockstep)                                               \
  /* test-determinism.c */                                                   \
  X(determinism_same_seed)                                                   \
  /* test-http.c: HTTP/1.1 connections, byte scripts (runtime/net) */        \
  X(http_request_fields)                                                     \
  X(http_split_reads)                                                        \
  X(http_response_bytes)                                                     \
  X(http_respond_checks)                                                     \
  X(http_pipelining)                                                         \
  X(http_pipelining_one_at_a_time)                                           \
  X(http_output_budget)                                                      \
  X(http_keep_alive)                                                         \
  X(http_bad_requests)                                                       \
  X(http_error_after_pipelined)                                              \
  X(http_limits)                                                             \
  X(http_expect_continue)                                                    \
  X(http_timeouts)                                                           \
  X(http_abort_pending)                                                      \
  X(http_backpressure)                                                       \
  X(http_no_parse_past_high_water)                                          \
  X(http_answered_at_once_take_turns)                                        \
  X(http_input_bounded)                                                      \
  X(http_alloc_failures)                                                     \
  /* test-ws.c: WebSocket connections, byte scripts (runtime/net) */        \
  X(ws_accept_key)                                                           \
  X(ws_handshake)                                                            \
  X(ws_handshake_refused)                                                    \
  X(ws_masked_text)                                                          \
  X(ws_fragments_and_ping)                                                   \
  X(ws_contexts_lent)                                                        \
  X(ws_unmasked_frame)                                                       \
  X(ws_invalid_utf8)                                                         \
  X(ws_message_too_big)                                                      \
  X(ws_tiny_fragments)                                                       \
  X(ws_head_without_payload)                                                 \
  X(ws_subprotocol)                                                          \
  X(ws_bad_frames)                                                           \
  X(ws_close_from_peer)                                                      \
  X(ws_close_from_server)                                                    \
  X(ws_keepalive)                                                            \
  X(ws_send_queue)                                                           \
  X(ws_output_budget)                                                        \
  X(ws_close_timeout_releases_output)                                        \
  X(ws_send_paths)                                                           \
  X(ws_upgrade_pipelined)                                                    \
  X(ws_gone_before_switch)                                                   \
  X(ws_upgrade_input_bounded)                                                \
  /* test-wsscan.c: parser offsets and the /ws fast path (runtime/serve) */ \
  X(jsonparse_offsets)                                                       \
  X(serve_wsscan)                                                            \
  /* test-bodyscan.c: the POST /step and /reset fast path (runtime/serve) */ \
  X(serve_bodyscan_step)                                                     \
  X(serve_bodyscan_reset)                                                    \
  /* test-evalresult.c: the step-result walk of ludo eval (runtime/cli) */  \
  X(eval_result_numbers)                                                     \
  X(eval_result_null_scores)                                                 \
  X(eval_result_observation)                                                 \
  X(cli_json_string)                                                         \
  /* test-netsock.c: the server on loopback sockets (runtime/net) */        \
  X(net_socket_http)                                                         \
  X(net_socket_ws_echo)                                                      \
  X(net_socket_big_response)                                                 \
  X(net_socket_slow_client)                                                  \
  X(net_socket_connection_limit)                                             \
  X(net_socket_server_close)                                                 \
  X(net_listen_errors)                                                       \
  X(net_listen_reuseport)                                                    \
  /* test-workers.c: server groups on two threads (runtime/serve) */        \
  X(workers_group_checks)                                                    \
  X(workers_forward_calls)                                                   \
  X(workers_shared_capacity)                                                 \
  X(workers_owner_stopped) \
  /* test-clientproto.c: the client's protocol, byte scripts (runtime/net) */\
  X(client_url_forms)                                                        \
  X(client_reply_parser)                                                     \
  X(client_handshake_request)                                                \
  X(client_request_frames)                                                   \
  X(client_reply_frames)                                                     \
  X(client_jsonraw_members)                                                  \
  /* test-client.c: the client on loopback sockets (runtime/net) */        \
  X(client_calls)                                                            \
  X(client_errors)                                                           \
  X(client_async)                                                            \
  X(client_calls_wait_for_connect)                                           \
  X(client_close_in_flight)                                                  \
  X(client_reconnect)                                                        \
  X(client_session_ended)                                                    \
  X(client_capacity)                                                         \
  X(client_keepalive)                                                        \
  X(client_reply_timeout)                                                    \
  X(client_keepalive_long_step)                                              \
  X(client_big_messages)                                                     \
  X(client_token)                                                            \
  X(client_scripted_server)                                                  \
  /* test-llm.c: ludo.llm against the mock LLM server (spec/llm) */         \
  X(llm_cancel_on_close)                                                     \
  X(llm_cancel_on_runtime_free)                                              \
  X(llm_session_usage)                                                       \
  X(llm_script_and_gate)                                                     \
  X(llm_host_loop_keeps_connection)                                          \
  X(llm_host_loop_idle_client)                                               \
  X(llm_host_loop_free_in_flight)                                            \
  /* test-freeing.c: what ludo_runtime_free does with what is left */     \
  X(freeing_server_close_then_free_borrowed)                                 \
  X(freeing_server_close_then_free_borrowed_client)                          \
  X(freeing_server_close_then_free)                                          \
  X(freeing_server_left_open)                                                \
  X(freeing_server_left_open_borrowed)                                       \
  X(freeing_env_busy_with_server)                                            \
  X(freeing_close_async_without_callback)                                    \
  X(freeing_callbacks_start_nothing)                                         \
  X(freeing_script_free_inside_own_async_call)                               \
  /* test-shared.c: shared prototypes (patched Lua, code cache) */          \
  X(shared_strings_identity)                                                 \
  X(shared_generation)                                                       \
  X(shared_env_late_module)                                                  \
  X(shared_code_smaller_sessions)                                            \
  X(shared_first_session)                                                    \
  X(shared_alloc_faults)                                                     \
  X(shared_gc_modes)

TEST_LIST(TEST_DECLARE)

#endif
