// Issue 21: each malformed `rate_limits` fixture (test/fixtures/config/list-errors/<name>.yaml)
// and its exact message after `<name>.yaml: `; the loader (test/unit/config/rule-list-errors.test.ts)
// and `floodgate check` (test/e2e/cli.test.ts) both give it.

export const LIST_ERRORS: readonly (readonly [string, string])[] = [
  ['both_rate_limit_and_rate_limits', "descriptor 'api.api_key' has both rate_limit and rate_limits: give one of them"],
  ['empty_rate_limits', "descriptor 'api.outer.inner' has an empty rate_limits list: give at least one limit"],
  ['null_rate_limits', "descriptor 'api.api_key' has an empty rate_limits list: give at least one limit"],
  ['bad_unit_in_list', "rate_limits entry 2 of 'api.outer_x.inner': invalid rate limit unit 'fortnight'"],
  ['unlimited_in_list', "rate_limits entry 2 of 'api.api_key': an unlimited limit cannot be in a rate_limits list"],
  [
    'same_counter_twice',
    "rate_limits entries 1 and 3 of 'api.api_key' count one counter (fixed_window over 60 s): give one another unit, unit_multiplier or algorithm",
  ],
  ['same_name_twice', "rate_limits entries 1 and 2 of 'api.api_key' have the same name 'burst'"],
  ['zero_burst_in_list', "rate_limits entry 2 of 'api.api_key': invalid rate limit burst '0': must be a positive integer"],
  ['unknown_key_in_list', "config error, unknown key 'brust'"],
  ['rate_limits_not_a_list', 'error loading config file: yaml: unmarshal errors:\n  line 5: cannot unmarshal !!map into []config.YamlRateLimit'],
  [
    'over_bound_in_list',
    "rate_limits entry 2 of 'api.api_key': rate limit 'api.api_key': sliding_log allows at most 1000 requests_per_unit (one stored entry per admitted call), got 1001",
  ],
  // Issue 26, finding 3: a list's limits are counters every matching descriptor counts.
  ['too_many_limits_in_list', "descriptor 'api.api_key' has 17 limits in its rate_limits list, more than the limit of 16"],
  ['replaces_own_list_name', "rate_limits entry 2 of 'api.api_key': replaces should not contain name of same descriptor"],
];
