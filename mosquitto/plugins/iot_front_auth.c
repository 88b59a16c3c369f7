/*
 * iot_front_auth: a Mosquitto 2.0 plugin (API v5) for a shard of `iot-stack up --mqtt-shards N`
 * behind HAProxy's TLS front (docs/scaling.md, "TLS through the front").
 *
 * HAProxy terminates the device's mutual TLS, checks that the CONNECT's client id (and user
 * name, if any) is the certificate's CN, and passes the decrypted stream to this shard over a
 * unix socket in a directory only the appliance's user can enter (0700). A log-in that arrives
 * on that socket is accepted WITHOUT a password, and its MQTT user name is set to its client
 * id, so the dynamic-security plugin's ACLs for that device apply to it exactly as to a
 * password log-in (or to the one-Mosquitto listener's `use_identity_as_username`).
 *
 * Mosquitto 2.0.11 has no plugin call naming a client's listener, but for a unix-socket client
 * mosquitto_client_address() is the socket's path, and for a TCP client it is an IP address,
 * which never starts with '/': so the address equal to plugin_opt_socket means "came through
 * the front". Every other log-in is deferred to the next plugin (dynsec: passwords as before).
 *
 * Load it BEFORE the dynamic-security plugin (the first answer other than
 * MOSQ_ERR_PLUGIN_DEFER decides). Option: plugin_opt_socket PATH (required, absolute).
 */
#include <stdio.h>
#include <string.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

static mosquitto_plugin_id_t *plugin_id;
static char socket_path[256];

static int on_basic_auth(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_basic_auth *ed = event_data;
	const char *address = mosquitto_client_address(ed->client);
	const char *client_id = mosquitto_client_id(ed->client);
	(void)event;
	(void)userdata;

	if (address == NULL || strcmp(address, socket_path) != 0) {
		return MOSQ_ERR_PLUGIN_DEFER; /* not through the front: dynsec checks the password */
	}
	/* HAProxy refused these already; a second check costs nothing */
	if (client_id == NULL || client_id[0] == '\0') {
		mosquitto_log_printf(MOSQ_LOG_WARNING, "iot_front_auth: refused an empty client id");
		return MOSQ_ERR_AUTH;
	}
	if (ed->username != NULL && strcmp(ed->username, client_id) != 0) {
		mosquitto_log_printf(MOSQ_LOG_WARNING,
			"iot_front_auth: refused %s: user name is not the client id", client_id);
		return MOSQ_ERR_AUTH;
	}
	if (mosquitto_set_username(ed->client, client_id) != MOSQ_ERR_SUCCESS) {
		return MOSQ_ERR_AUTH;
	}
	return MOSQ_ERR_SUCCESS;
}

int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	for (int i = 0; i < supported_version_count; i++) {
		if (supported_versions[i] == 5) {
			return 5;
		}
	}
	return -1;
}

int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata,
	struct mosquitto_opt *opts, int opt_count)
{
	(void)userdata;
	plugin_id = identifier;
	socket_path[0] = '\0';
	for (int i = 0; i < opt_count; i++) {
		if (strcmp(opts[i].key, "socket") == 0) {
			snprintf(socket_path, sizeof(socket_path), "%s", opts[i].value);
		}
	}
	if (socket_path[0] != '/') {
		mosquitto_log_printf(MOSQ_LOG_ERR,
			"iot_front_auth: plugin_opt_socket must be the front's absolute socket path");
		return MOSQ_ERR_INVAL;
	}
	return mosquitto_callback_register(plugin_id, MOSQ_EVT_BASIC_AUTH, on_basic_auth, NULL, NULL);
}

int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *opts, int opt_count)
{
	(void)userdata;
	(void)opts;
	(void)opt_count;
	return mosquitto_callback_unregister(plugin_id, MOSQ_EVT_BASIC_AUTH, on_basic_auth, NULL);
}
