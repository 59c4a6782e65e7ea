//! The reference's documented examples, written here in its format, and the
//! files it refuses.

use super::*;

fn load(yaml: &str) -> Config {
    Config::load(&[("config.yaml".to_string(), yaml.to_string())], false)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn refused(yaml: &str) -> String {
    match Config::load(&[("bad.yaml".to_string(), yaml.to_string())], false) {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(ConfigError(why)) => why,
    }
}

/// (requests per window, window ms, stats key) of a lookup.
fn found(config: &Config, domain: &str, entries: &[(&str, &str)]) -> Option<(u64, u64, String)> {
    config.lookup(domain, entries).map(|limit| {
        let first = limit.windows.first().copied();
        (
            first.map_or(0, |w| w.limit),
            first.map_or(0, |w| w.window_ms),
            limit.stats_key,
        )
    })
}

const EXAMPLE_1: &str = "
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
";

#[test]
fn key_and_value_pick_a_limit() {
    let config = load(EXAMPLE_1);
    assert_eq!(
        found(&config, "mongo_cps", &[("database", "users")]),
        Some((500, 1_000, "mongo_cps.database_users".to_string()))
    );
    assert_eq!(found(&config, "mongo_cps", &[("database", "other")]), None);
    assert_eq!(found(&config, "other", &[("database", "users")]), None);
}

#[test]
fn nested_descriptors_and_a_key_without_value() {
    let config = load(
        "
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
",
    );
    let marketing = [("message_type", "marketing"), ("to_number", "2061111111")];
    assert_eq!(
        found(&config, "messaging", &marketing),
        Some((
            5,
            86_400_000,
            "messaging.message_type_marketing.to_number".to_string()
        ))
    );
    assert_eq!(
        found(&config, "messaging", &[("to_number", "2061111111")]),
        Some((100, 86_400_000, "messaging.to_number".to_string()))
    );
    // The placeholder level has no limit of its own.
    assert_eq!(
        found(&config, "messaging", &[("message_type", "marketing")]),
        None
    );
}

#[test]
fn the_most_specific_match_wins_and_zero_blocks() {
    let config = load(
        "
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
",
    );
    assert_eq!(
        found(
            &config,
            "edge_proxy_per_ip",
            &[("remote_address", "50.0.0.1")]
        ),
        Some((10, 1_000, "edge_proxy_per_ip.remote_address".to_string()))
    );
    assert_eq!(
        found(
            &config,
            "edge_proxy_per_ip",
            &[("remote_address", "50.0.0.5")]
        ),
        Some((
            0,
            1_000,
            "edge_proxy_per_ip.remote_address_50.0.0.5".to_string()
        ))
    );
}

#[test]
fn a_limit_counts_only_at_the_requests_depth() {
    let shallow = load(
        "
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
",
    );
    let request = [("key", "value"), ("subkey", "subvalue")];
    assert_eq!(found(&shallow, "example4", &request), None);
    let deep = load(
        "
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
",
    );
    assert_eq!(
        found(&deep, "example4", &request),
        Some((300, 1_000, "example4.key_value.subkey".to_string()))
    );
}

#[test]
fn unlimited_shadow_mode_and_replaces_are_kept() {
    let config = load(
        "
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: wider
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
",
    );
    let ldap = config.lookup("internal", &[("ldap", "x")]).unwrap();
    assert!(ldap.unlimited && ldap.windows.is_empty());
    let shadow = config
        .lookup("internal", &[("service", "auth"), ("user", "user-a")])
        .unwrap();
    assert!(shadow.shadow_mode);
    let replacing = config
        .lookup("internal", &[("key_2", "value_2"), ("user", "bkthomps")])
        .unwrap();
    assert_eq!(
        (replacing.name.as_str(), replacing.replaces),
        ("wider", vec!["specific_limit".to_string()])
    );
}

#[test]
fn detailed_metric_and_value_to_metric_name_the_statistics() {
    let config = load(
        "
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
",
    );
    assert_eq!(
        found(&config, "example8", &[("key1", "unspecified_value")]).map(|f| f.2),
        Some("example8.key1_unspecified_value".to_string())
    );
    let request = [
        ("route", "api"),
        ("http_method", "GET"),
        ("subject_id", "123"),
    ];
    assert_eq!(
        found(&config, "example8", &request).map(|f| f.2),
        Some("example8.route_api.http_method_GET.subject_id".to_string())
    );
}

#[test]
fn wildcards_match_anywhere_and_may_share_one_log() {
    let config = load(
        "
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 21
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
",
    );
    assert_eq!(
        found(&config, "example9", &[("key1", "valueXYZ")]).map(|f| f.0),
        Some(20)
    );
    assert_eq!(found(&config, "example9", &[("key1", "valu")]), None);
    assert_eq!(
        found(&config, "example9", &[("path", "/api/123/action")]).map(|f| f.0),
        Some(21)
    );
    assert_eq!(
        found(&config, "example9", &[("path", "/api/123/other")]),
        None
    );
    let shared = config
        .lookup("example9", &[("files", "files/a.pdf")])
        .unwrap();
    assert_eq!(shared.shared_values, vec![Some("files/*".to_string())]);
    let own = config.lookup("example9", &[("key1", "value1")]).unwrap();
    assert!(own.shared_values.is_empty());
}

#[test]
fn several_wildcards_and_value_to_metric_through_one() {
    let config = load(
        "
domain: example9
descriptors:
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit:
              unit: minute
              requests_per_unit: 100
",
    );
    assert_eq!(
        found(
            &config,
            "example9",
            &[("route", "/api/v1/resource/123/action")]
        )
        .map(|f| f.0),
        Some(20)
    );
    assert_eq!(
        found(
            &config,
            "example9",
            &[("route", "/api/v1/resource/123/other")]
        ),
        None
    );
    let request = [
        ("user", "alice"),
        ("action", "readfile"),
        ("resource", "documents"),
    ];
    assert_eq!(
        found(&config, "example9", &request),
        Some((
            100,
            60_000,
            "example9.user_alice.action_readfile.resource".to_string()
        ))
    );
}

#[test]
fn wildcard_matching_follows_the_reference() {
    let split = |pattern: &str| pattern.split('*').map(str::to_string).collect::<Vec<_>>();
    for (pattern, value, matches) in [
        ("a_v*", "a_v", true),
        ("a_v*", "a_vx", true),
        ("a_v*", "a_", false),
        ("a_/x/*/y", "a_/x//y", true),
        ("a_/x/*/y", "a_/x/1/z", false),
        ("a_*b*b", "a_b", false),
        ("a_*b*b", "a_bb", true),
        ("a_v", "a_v", true),
    ] {
        assert_eq!(
            wildcard_match(&split(pattern), value),
            matches,
            "{pattern} {value}"
        );
    }
}

#[test]
fn quota_mode_metadata_and_our_windows() {
    let config = load(
        "
domain: quota
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
    metadata:
      service_with_quota:
        name: service_1
  - key: api
    rate_limit:
      unit: 1500ms
      requests_per_unit: 10
      windows:
        - unit: hour
          requests_per_unit: 500
",
    );
    let quota = config.lookup("quota", &[("service", "service_1")]).unwrap();
    assert!(quota.quota_mode);
    let metadata = quota.metadata.unwrap();
    assert!(metadata.fields.contains_key("service_with_quota"));
    let api = config.lookup("quota", &[("api", "x")]).unwrap();
    assert_eq!(
        api.windows,
        vec![
            Window {
                window_ms: 1_500,
                limit: 10,
                unit: UNKNOWN_UNIT
            },
            Window {
                window_ms: 3_600_000,
                limit: 500,
                unit: 3
            },
        ]
    );
}

#[test]
fn yaml_1_1_booleans_are_read_as_the_reference_reads_them() {
    let config = load(
        "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: yes\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: u\n    rate_limit: {unlimited: on}\n",
    );
    assert!(config.lookup("d", &[("k", "x")]).unwrap().shadow_mode);
    assert!(config.lookup("d", &[("u", "x")]).unwrap().unlimited);
}

#[test]
fn units_of_ours_and_the_references() {
    assert_eq!(parse_unit("second"), Some((1, 1_000)));
    assert_eq!(parse_unit("Week"), Some((7, 604_800_000)));
    assert_eq!(parse_unit("60s"), Some((2, 60_000)));
    assert_eq!(parse_unit("250ms"), Some((UNKNOWN_UNIT, 250)));
    assert_eq!(
        (unit_name(2), unit_name(7), unit_name(0)),
        ("MINUTE", "WEEK", "UNKNOWN")
    );
    for bad in [
        "",
        "unknown",
        "0s",
        "05s",
        "1.5s",
        "-1s",
        "10",
        "s",
        "99999999999999999999d",
        "9000000000001ms",
    ] {
        assert_eq!(parse_unit(bad), None, "{bad}");
    }
}

#[test]
fn merged_domains_add_up_and_duplicates_are_refused() {
    let a = ("a.yaml".to_string(), "domain: d\ndescriptors:\n  - key: x\n    rate_limit: {unit: second, requests_per_unit: 1}\n".to_string());
    let b = ("b.yaml".to_string(), "domain: d\ndescriptors:\n  - key: y\n    rate_limit: {unit: second, requests_per_unit: 2}\n".to_string());
    let refused = Config::load(&[a.clone(), b.clone()], false).unwrap_err();
    assert_eq!(refused.0, "b.yaml: duplicate domain 'd' in config file");
    let merged = Config::load(&[a, b], true).unwrap();
    assert_eq!(found(&merged, "d", &[("y", "")]).map(|f| f.0), Some(2));
    assert_eq!(found(&merged, "d", &[("x", "")]).map(|f| f.0), Some(1));
}

#[test]
fn files_the_reference_refuses_are_refused_with_its_reason() {
    let limit = "rate_limit: {unit: second, requests_per_unit: 1}";
    for (yaml, why) in [
        ("descriptors: []".to_string(), "config file cannot have empty domain"),
        (
            format!("domain: d\ndescriptors:\n  - key: k\n    {limit}\n  - key: k\n    {limit}"),
            "duplicate descriptor composite key 'd.k'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}".to_string(),
            "invalid rate limit unit 'fortnight'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}".to_string(),
            "invalid rate limit unit ''",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}".to_string(),
            "should not specify rate limit unit when unlimited",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: n, unit: second, requests_per_unit: 1, replaces: [{name: n}]}".to_string(),
            "replaces should not contain name of same descriptor",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}".to_string(),
            "should not have an empty replaces entry",
        ),
        (
            format!("domain: d\ndescriptors:\n  - value: v\n    {limit}"),
            "descriptor has empty key",
        ),
        (
            format!("domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n    {limit}"),
            "share_threshold can only be used with wildcard values (containing '*'), but found key 'k'",
        ),
        (
            format!("domain: d\ndescriptors:\n  - key: k\n    colour: red\n    {limit}"),
            "config error, unknown key 'colour'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1.5}".to_string(),
            "error checking config",
        ),
        (
            "domain: d\ndescriptors: [k]".to_string(),
            "config error, yaml file contains list of type other than map: k",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: many}".to_string(),
            "error loading config file: field 'requests_per_unit' must be a whole number, not many",
        ),
        (
            format!(
                "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      windows:\n{}",
                "        - {unit: minute, requests_per_unit: 5}\n".repeat(100)
            ),
            "'d.k' has 101 windows: at most 100 in all",
        ),
        (
            "domain: d\ndescriptors: everything".to_string(),
            "error loading config file: field 'descriptors' must be a list, not everything",
        ),
        (
            "domain: d\n  descriptors: -".to_string(),
            "error loading config file: ",
        ),
    ] {
        let text = refused(&yaml);
        assert!(
            text.starts_with(&format!("bad.yaml: {why}")),
            "{yaml}\n refused with: {text}\n expected: {why}"
        );
    }
}

#[test]
fn a_descriptors_own_limit_overrides_the_file() {
    let limit = override_limit("d", &[("k", "v"), ("u", "")], 42, 2).unwrap();
    assert_eq!(
        (limit.windows, limit.stats_key.as_str()),
        (
            vec![Window {
                window_ms: 60_000,
                limit: 42,
                unit: 2
            }],
            "d.k_v.u"
        )
    );
    assert_eq!(override_limit("d", &[("k", "v")], 1, 0), None);
}
