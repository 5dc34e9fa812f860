/*
 * Unit tests for the quotas per credential (core/base/quota.c): a refusal
 * names the key, the count and the fix; credentials are counted apart; and
 * eight threads taking and giving at once never hold more than the quota
 * (one lock checks and counts: no check-then-act race lets one through).
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/conf.h"
#include "core/base/keys.h"
#include "core/base/quota.h"

static int setup(void **state)
{
	(void)state;
	sg_config_reset();
	sg_core_keys_register();
	assert_int_equal(sg_config_set_override("server.quota_shells=3", NULL), 0);
	sg_quota_enforce(true); /* as an HTTP server with several tokens */
	return 0;
}

/* One credential served: counted, never refused (the server-wide caps bound it). */
static void one_credential_counts_only(void **state)
{
	struct sg_err err;

	(void)state;
	sg_quota_enforce(false);
	for (int i = 0; i < 5; i++)
		assert_int_equal(sg_quota_take("local:0", SG_QUOTA_SHELLS, &err), 0);
	assert_int_equal(sg_quota_count("local:0", SG_QUOTA_SHELLS), 5);
	for (int i = 0; i < 5; i++)
		sg_quota_give("local:0", SG_QUOTA_SHELLS);
	assert_int_equal(sg_quota_count("local:0", SG_QUOTA_SHELLS), 0);
}

static void refusal_names_the_quota(void **state)
{
	struct sg_err err;

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(sg_quota_take("token:a", SG_QUOTA_SHELLS, &err), 0);
	assert_int_equal(sg_quota_take("token:a", SG_QUOTA_SHELLS, &err), -1);
	assert_int_equal(err.code, SG_E_BUSY);
	assert_string_equal(err.msg, "credential at its shell quota (3 of 3, [server] quota_shells): "
				     "remove one (sandbox_env shell_remove) or raise the key");
	/* another credential is not affected */
	assert_int_equal(sg_quota_take("token:b", SG_QUOTA_SHELLS, &err), 0);
	assert_int_equal(sg_quota_count("token:b", SG_QUOTA_SHELLS), 1);
	sg_quota_give("token:a", SG_QUOTA_SHELLS);
	assert_int_equal(sg_quota_take("token:a", SG_QUOTA_SHELLS, &err), 0);
	for (int i = 0; i < 3; i++)
		sg_quota_give("token:a", SG_QUOTA_SHELLS);
	sg_quota_give("token:b", SG_QUOTA_SHELLS);
	assert_int_equal(sg_quota_count("token:a", SG_QUOTA_SHELLS), 0);
	/* a credential holding nothing is not listed */
	json_t *u = sg_quota_usage();
	assert_int_equal(json_array_size(u), 0);
	json_decref(u);
}

static atomic_int holding, peak;

static void *hammer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++) {
		if (sg_quota_take("token:c", SG_QUOTA_SHELLS, NULL) < 0)
			continue;
		int now = atomic_fetch_add(&holding, 1) + 1;
		int p = atomic_load(&peak);

		while (now > p && !atomic_compare_exchange_weak(&peak, &p, now))
			;
		atomic_fetch_sub(&holding, 1);
		sg_quota_give("token:c", SG_QUOTA_SHELLS);
	}
	return NULL;
}

static void exact_under_concurrency(void **state)
{
	pthread_t th[8];

	(void)state;
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	assert_true(atomic_load(&peak) <= 3);
	assert_true(atomic_load(&peak) >= 1);
	assert_int_equal(sg_quota_count("token:c", SG_QUOTA_SHELLS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(refusal_names_the_quota, setup),
		cmocka_unit_test_setup(exact_under_concurrency, setup),
		cmocka_unit_test_setup(one_credential_counts_only, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
