/**
 * The built-in MetaService config of kvcm-meta §8, copied verbatim: used when neither
 * `--meta_config_file` nor KVCM_META_CONFIG_FILE names a file. With it every published KVCM
 * MetaService curl example succeeds (§10.1).
 */
export const DEFAULT_META_CONFIG_JSON = `{"storages": [{"global_unique_name": "local_file", "type": "file", "root_path": "./data/kvcm"},
              {"global_unique_name": "event_report_l1p5", "type": "event_report_l1p5"},
              {"global_unique_name": "event_report_l2", "type": "event_report_l2"}],
 "instance_groups": [
   {"name": "default", "storage_candidates": ["local_file"], "event_report_storage_candidates": ["event_report_l1p5", "event_report_l2"]},
   {"name": "test_group", "storage_candidates": ["local_file"], "event_report_storage_candidates": ["event_report_l1p5", "event_report_l2"]}],
 "bootstrap_instances": [
   {"instance_group": "test_group", "instance_id": "test_instance", "block_size": 8, "default_query_type": "QT_PREFIX_MATCH",
    "location_spec_infos": [{"name": "tp0", "size": 4096000}, {"name": "full_attention:group=0:tp=0", "size": 4096}],
    "model_deployment": {"model_name": "test", "dtype": "fp16", "tp_size": 1, "dp_size": 1, "pp_size": 1, "lora_name": "custom_lora", "extra": "extra", "user_data": "custom_user_data"}},
   {"instance_group": "test_group", "instance_id": "test_instance_id_2", "block_size": 8, "default_query_type": "QT_PREFIX_MATCH",
    "location_spec_infos": [{"name": "tp0", "size": 4096000}],
    "model_deployment": {"model_name": "test", "dtype": "fp16", "tp_size": 1, "dp_size": 1, "pp_size": 1, "lora_name": "custom_lora", "extra": "extra", "user_data": "custom_user_data"}}]}
`;
