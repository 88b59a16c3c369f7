/*
 * iot_auth_metrics: a Mosquitto 2.0 plugin (API v5) that counts, per MQTT user name,
 * refused log-ins and refused publishes, and writes the counts to a JSON file every few
 * seconds (docs/security.md, "Metrics per tenant"). The bridge maps user names to tenants and
 * exports them to Prometheus.
 *
 * Load it BEFORE the dynamic-security plugin: callbacks of one event run in configuration
 * order and the first answer other than MOSQ_ERR_PLUGIN_DEFER decides, so this plugin sees
 * every check, always defers, and learns the verdict from what Mosquitto 2.0.11 does next on
 * its single thread:
 *  - a log-in: a refused one is disconnected (MOSQ_EVT_DISCONNECT for that client) before any
 *    other event; an accepted one is followed by some other event (the loop's tick at least).
 *  - a PUBLISH: an allowed one reaches MOSQ_EVT_MESSAGE for the same client right after its
 *    write check (src/handle_publish.c); a refused one does not. `$CONTROL/` topics never do,
 *    and the write check of a will sent at disconnect has no message event: both are skipped.
 * Refused subscriptions cannot be told apart this way (no event follows either verdict).
 *
 * Options: plugin_opt_file PATH (required), plugin_opt_interval_s N (5),
 * plugin_opt_max_users N (1000; further user names are counted under "" so a flood of random
 * user names cannot grow memory).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#define MAX_NAME 256

struct entry {
	char *name;
	unsigned long long auth_failures;
	unsigned long long denied_publishes;
};

static mosquitto_plugin_id_t *plugin_id;
static char *out_path;
static char *tmp_path;
static time_t interval_s = 5;
static size_t max_users = 1000;
static struct entry *entries;
static size_t entry_count;
static struct entry overflow = {"", 0, 0};
static int dirty = 1;
static time_t last_write;

/* the log-in and the publish whose verdict is not known yet */
static const struct mosquitto *auth_client;
static char auth_name[MAX_NAME];
static const struct mosquitto *write_client;
static char write_name[MAX_NAME];
/* a client just disconnected: its will's write check is not a device's publish */
static const struct mosquitto *gone_client;

static void copy_name(char *dst, const char *src)
{
	snprintf(dst, MAX_NAME, "%s", src ? src : "");
}

static struct entry *find(const char *name)
{
	for(size_t i = 0; i < entry_count; i++){
		if(strcmp(entries[i].name, name) == 0) return &entries[i];
	}
	if(entry_count >= max_users || name[0] == '\0') return &overflow;
	char *copy = strdup(name);
	if(copy == NULL) return &overflow;
	entries[entry_count].name = copy;
	entries[entry_count].auth_failures = 0;
	entries[entry_count].denied_publishes = 0;
	return &entries[entry_count++];
}

static void settle(void)
{
	/* any event but the awaited one means: the log-in was accepted, the publish refused */
	auth_client = NULL;
	if(write_client != NULL){
		find(write_name)->denied_publishes++;
		dirty = 1;
		write_client = NULL;
	}
}

static void put_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for(const unsigned char *p = (const unsigned char *)s; *p; p++){
		if(*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
		else if(*p < 0x20) fprintf(f, "\\u%04x", *p);
		else fputc(*p, f);
	}
	fputc('"', f);
}

static void put_entry(FILE *f, const struct entry *e)
{
	put_json_string(f, e->name);
	fprintf(f, ":{\"auth_failures\":%llu,\"denied_publishes\":%llu}", e->auth_failures,
			e->denied_publishes);
}

static void write_file(time_t now)
{
	FILE *f = fopen(tmp_path, "w");
	if(f == NULL){
		mosquitto_log_printf(MOSQ_LOG_WARNING, "iot_auth_metrics: cannot write %s: %s",
				tmp_path, strerror(errno));
		return;
	}
	fprintf(f, "{\"written_at\":%lld,\"max_users\":%zu,\"users\":{", (long long)now, max_users);
	for(size_t i = 0; i < entry_count; i++){
		if(i) fputc(',', f);
		put_entry(f, &entries[i]);
	}
	fprintf(f, "},\"other\":{\"auth_failures\":%llu,\"denied_publishes\":%llu}}\n",
			overflow.auth_failures, overflow.denied_publishes);
	if(fclose(f) != 0 || rename(tmp_path, out_path) != 0){
		mosquitto_log_printf(MOSQ_LOG_WARNING, "iot_auth_metrics: cannot replace %s: %s",
				out_path, strerror(errno));
		return;
	}
	dirty = 0;
	last_write = now;
}

static int on_basic_auth(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_basic_auth *ed = event_data;
	(void)event; (void)userdata;
	settle();
	auth_client = ed->client;
	copy_name(auth_name, ed->username);
	return MOSQ_ERR_PLUGIN_DEFER;
}

static int on_acl_check(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_acl_check *ed = event_data;
	(void)event; (void)userdata;
	if(ed->access != MOSQ_ACL_WRITE) return MOSQ_ERR_PLUGIN_DEFER;
	int will = ed->client == gone_client;
	settle();
	if(will || strncmp(ed->topic, "$CONTROL/", 9) == 0) return MOSQ_ERR_PLUGIN_DEFER;
	write_client = ed->client;
	copy_name(write_name, mosquitto_client_username(ed->client));
	return MOSQ_ERR_PLUGIN_DEFER;
}

static int on_message(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_message *ed = event_data;
	(void)event; (void)userdata;
	if(ed->client == write_client) write_client = NULL;  /* allowed */
	settle();
	return MOSQ_ERR_SUCCESS;
}

static int on_disconnect(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_disconnect *ed = event_data;
	(void)event; (void)userdata;
	if(ed->client == auth_client){
		find(auth_name)->auth_failures++;
		dirty = 1;
		auth_client = NULL;
	}
	settle();
	gone_client = ed->client;
	return MOSQ_ERR_SUCCESS;
}

static int on_tick(int event, void *event_data, void *userdata)
{
	(void)event; (void)event_data; (void)userdata;
	settle();
	gone_client = NULL;
	time_t now = time(NULL);
	if(dirty && now - last_write >= interval_s) write_file(now);
	return MOSQ_ERR_SUCCESS;
}

int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	for(int i = 0; i < supported_version_count; i++){
		if(supported_versions[i] == 5) return 5;
	}
	return -1;
}

int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **user_data,
		struct mosquitto_opt *opts, int opt_count)
{
	(void)user_data;
	plugin_id = identifier;
	for(int i = 0; i < opt_count; i++){
		if(strcmp(opts[i].key, "file") == 0){
			out_path = strdup(opts[i].value);
		}else if(strcmp(opts[i].key, "interval_s") == 0){
			interval_s = atol(opts[i].value);
		}else if(strcmp(opts[i].key, "max_users") == 0){
			max_users = (size_t)atol(opts[i].value);
		}
	}
	if(out_path == NULL || interval_s < 1 || max_users < 1){
		mosquitto_log_printf(MOSQ_LOG_ERR,
				"iot_auth_metrics: needs plugin_opt_file, interval_s >= 1, max_users >= 1");
		return MOSQ_ERR_INVAL;
	}
	size_t n = strlen(out_path) + 5;
	tmp_path = malloc(n);
	entries = calloc(max_users, sizeof(struct entry));
	if(tmp_path == NULL || entries == NULL) return MOSQ_ERR_NOMEM;
	snprintf(tmp_path, n, "%s.new", out_path);
	write_file(time(NULL));  /* the file exists (all zero) from the start */
	int rc = 0;
	rc |= mosquitto_callback_register(plugin_id, MOSQ_EVT_BASIC_AUTH, on_basic_auth, NULL, NULL);
	rc |= mosquitto_callback_register(plugin_id, MOSQ_EVT_ACL_CHECK, on_acl_check, NULL, NULL);
	rc |= mosquitto_callback_register(plugin_id, MOSQ_EVT_MESSAGE, on_message, NULL, NULL);
	rc |= mosquitto_callback_register(plugin_id, MOSQ_EVT_DISCONNECT, on_disconnect, NULL, NULL);
	rc |= mosquitto_callback_register(plugin_id, MOSQ_EVT_TICK, on_tick, NULL, NULL);
	return rc ? MOSQ_ERR_UNKNOWN : MOSQ_ERR_SUCCESS;
}

int mosquitto_plugin_cleanup(void *user_data, struct mosquitto_opt *opts, int opt_count)
{
	(void)user_data; (void)opts; (void)opt_count;
	settle();
	if(out_path && tmp_path) write_file(time(NULL));
	mosquitto_callback_unregister(plugin_id, MOSQ_EVT_BASIC_AUTH, on_basic_auth, NULL);
	mosquitto_callback_unregister(plugin_id, MOSQ_EVT_ACL_CHECK, on_acl_check, NULL);
	mosquitto_callback_unregister(plugin_id, MOSQ_EVT_MESSAGE, on_message, NULL);
	mosquitto_callback_unregister(plugin_id, MOSQ_EVT_DISCONNECT, on_disconnect, NULL);
	mosquitto_callback_unregister(plugin_id, MOSQ_EVT_TICK, on_tick, NULL);
	for(size_t i = 0; i < entry_count; i++) free(entries[i].name);
	free(entries);
	free(tmp_path);
	free(out_path);
	entries = NULL; tmp_path = NULL; out_path = NULL; entry_count = 0;
	return MOSQ_ERR_SUCCESS;
}
