// SPDX-License-Identifier: GPL-2.0-only
/*
 * A datastore program written only against the Neuron SDK's declarations (nrt/nds/neuron_ds.h
 * and the ndl.h items it pulls in): it gets its device with ndl_open_device() and calls all 21
 * nds_* functions, as a runtime (the producer, this process) and a monitor (a forked child,
 * reading the parent's datastore) would. It must build as C and as C++ with
 * -Wall -Wextra -Werror (userspace/nds-capi/tests/c_program.rs); the guest build links it
 * statically and tests/guest/tests/sdk_program.rs runs it against the module's /dev/neuron0.
 *
 * Prints one line per failed check and "sdk program: N passed, N failed"; exits non-zero on
 * any failure.
 */
#ifndef __cplusplus
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nrt/nds/neuron_ds.h>

#ifdef __cplusplus
#define STATIC_CHECK(condition) static_assert(condition, #condition)
#else
#define STATIC_CHECK(condition) _Static_assert(condition, #condition)
#endif

/* The SDK's constants, with the values SDK code relies on. */
STATIC_CHECK(OBJECT_TYPE_MODEL_NODE_INFO == 0 && OBJECT_TYPE_PROCESS_INFO == 1);
STATIC_CHECK(OBJECT_TYPE_PROCESS_INFO_EXT == 2);
STATIC_CHECK(MODEL_MEM_USAGE_LOCATION_COUNT == 2 && NDS_DMA_MEM_USAGE_SLOT_COUNT == 12);
STATIC_CHECK(NDS_DMA_MEM_USAGE_SLOT_MISC == 4);
STATIC_CHECK(BIT_INDEX_TEST_FEATURE == 0 && BIT_INDEX_MULTICORE_FEATURE == 1);
STATIC_CHECK(BIT_INDEX_COUNT == 2);
STATIC_CHECK(sizeof(nds_model_node_info_t) == 284 && sizeof(nds_mem_usage_info_t) == 16);
STATIC_CHECK(sizeof(nds_model_node_mem_usage_info_t) == 384);
STATIC_CHECK(sizeof(nds_process_info_t) == 60 && sizeof(nds_process_info_ext_t) == 256);
STATIC_CHECK(sizeof(((nds_model_node_info_t *)0)->uuid) == 16);

#define MODELS 64
#define NAME_FORMAT "sdk-model-%u"

static int passed, failed;

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (cond) {                                                            \
			passed++;                                                      \
		} else {                                                               \
			failed++;                                                      \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                \
		}                                                                      \
	} while (0)

/* A model's 16 uuid bytes, written the way SDK code does: strncpy into char uuid[16]. */
static void model_uuid(char uuid[16], unsigned int model)
{
	char text[17];

	snprintf(text, sizeof(text), "uuid-%011u", model);
	strncpy(uuid, text, 16);
}

/* Frees the read copies and their array; the datastore keeps its models. */
static void free_models(nds_obj_handle_t *models, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		CHECK(nds_obj_delete(models[i]) == 0);
	free(models);
}

/* Models visible through inst, all read copies freed again. */
static size_t model_count(nds_instance_t *inst)
{
	nds_obj_handle_t *models = NULL;
	size_t count = 0;

	CHECK(nds_read_all_model_nodes(inst, &models, &count) == 0);
	free_models(models, count);
	return count;
}

/* The producer's counters and records, which the monitor reads back. */
static void publish(nds_instance_t *producer)
{
	nds_obj_handle_t obj;
	nds_process_info_t *info;
	nds_process_info_ext_t *ext;
	uint64_t value;

	CHECK(nds_increment_nc_counter(producer, 1, NDS_NC_COUNTER_INFER_COMPLETED, 5) == 0);
	CHECK(nds_decrement_nc_counter(producer, 1, NDS_NC_COUNTER_INFER_COMPLETED, 2) == 0);
	value = 1234;
	CHECK(nds_set_nc_counter(producer, 0, NDS_NC_COUNTER_LATENCY_TOTAL, &value) == 0);
	CHECK(nds_increment_nc_counter(producer, 0, NDS_EXT_NC_COUNTER_HW_ERR_HBM_UE, 1) == 0);
	CHECK(nds_get_nc_counter(producer, 1, NDS_NC_COUNTER_INFER_COMPLETED, &value) == 0 &&
	      value == 3);

	value = (2ull << 40) | (31ull << 32) | 7;
	CHECK(nds_set_nd_counter(producer, NDS_ND_COUNTER_RUNTIME_VERSION, &value) == 0);
	CHECK(nds_increment_nd_counter(producer, NDS_ND_COUNTER_MEM_USAGE_CODE_HOST, 4096) == 0);
	CHECK(nds_decrement_nd_counter(producer, NDS_ND_COUNTER_MEM_USAGE_CODE_HOST, 1024) == 0);
	CHECK(nds_or_nd_counter(producer, NDS_ND_COUNTER_FEATURE_BITMAP,
				BIT_INDEX_MULTICORE_FEATURE) == 0);
	CHECK(nds_get_nd_counter(producer, NDS_ND_COUNTER_MEM_USAGE_CODE_HOST, &value) == 0 &&
	      value == 3072);

	obj = nds_obj_new(producer, OBJECT_TYPE_PROCESS_INFO);
	info = nds_obj_handle_to_process_info(obj);
	CHECK(info != NULL);
	if (info) {
		info->framework_type = 3;
		strncpy(info->tag, "sdk-program", sizeof(info->tag) - 1);
		info->runtime_version.major = 2;
		info->runtime_version.minor = 31;
		info->runtime_version.build = 7;
	}
	CHECK(nds_obj_commit(obj) == 0);
	CHECK(nds_obj_delete(obj) == 0);

	obj = nds_obj_new(producer, OBJECT_TYPE_PROCESS_INFO_EXT);
	ext = nds_obj_handle_to_process_info_ext(obj);
	CHECK(ext != NULL);
	if (ext)
		snprintf(ext->tag, sizeof(ext->tag), "sdk-program, pid %d", (int)getpid());
	CHECK(nds_obj_commit(obj) == 0);
	CHECK(nds_obj_delete(obj) == 0);
}

/* Loads MODELS models into created[]; one more finds the table full. */
static void load_models(nds_instance_t *producer, nds_obj_handle_t created[MODELS],
			nds_obj_handle_t *spare)
{
	unsigned int i;

	for (i = 0; i < MODELS; i++) {
		nds_model_node_info_t *node;
		nds_model_node_mem_usage_info_t *usage;

		created[i] = nds_obj_new(producer, OBJECT_TYPE_MODEL_NODE_INFO);
		node = nds_obj_handle_to_model_node_info(created[i]);
		usage = nds_obj_handle_to_model_node_mem_usage(created[i]);
		CHECK(node != NULL && usage != NULL);
		if (!node || !usage)
			continue;
		node->model_id = i;
		node->model_node_id = 100 + i;
		snprintf(node->name, sizeof(node->name), NAME_FORMAT, i);
		model_uuid(node->uuid, i);
		node->nc_index = (uint8_t)(i % 2);
		usage->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].total_size = 4096 * (size_t)i;
		usage->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].chunk_count = i;
		CHECK(nds_obj_commit(created[i]) == 0);
	}
	*spare = nds_obj_new(producer, OBJECT_TYPE_MODEL_NODE_INFO);
	/* libnds reports a full model table as a positive ENOSPC. */
	CHECK(nds_obj_commit(*spare) == ENOSPC);
}

/* The monitor's side, in the child: everything the producer published, read-only. */
static void monitor(pid_t producer_pid)
{
	ndl_device_t *device = NULL;
	nds_instance_t *reader = NULL;
	nds_obj_handle_t obj, *models = NULL;
	nds_process_info_t *info;
	nds_process_info_ext_t *ext;
	size_t count = 0, i;
	uint64_t value = 0;

	CHECK(ndl_open_device(0, NULL, &device) == 0);
	if (!device)
		return;
	CHECK(nds_open(device, producer_pid, &reader) == 0);
	if (!reader) {
		ndl_close_device(device);
		return;
	}

	CHECK(nds_get_nc_counter(reader, 1, NDS_NC_COUNTER_INFER_COMPLETED, &value) == 0 &&
	      value == 3);
	CHECK(nds_get_nc_counter(reader, 0, NDS_NC_COUNTER_LATENCY_TOTAL, &value) == 0 &&
	      value == 1234);
	CHECK(nds_get_nc_counter(reader, 0, NDS_EXT_NC_COUNTER_HW_ERR_HBM_UE, &value) == 0 &&
	      value == 1);
	CHECK(nds_get_nd_counter(reader, NDS_ND_COUNTER_FEATURE_BITMAP, &value) == 0 &&
	      value == 1ull << BIT_INDEX_MULTICORE_FEATURE);
	CHECK(nds_get_nd_counter(reader, NDS_ND_COUNTER_RUNTIME_VERSION, &value) == 0 &&
	      value == ((2ull << 40) | (31ull << 32) | 7));

	obj = nds_read_process_info(reader);
	info = nds_obj_handle_to_process_info(obj);
	CHECK(info && info->framework_type == 3 && strcmp(info->tag, "sdk-program") == 0);
	CHECK(info && info->runtime_version.minor == 31 && info->runtime_version.build == 7);
	CHECK(nds_obj_delete(obj) == 0);
	obj = nds_read_process_info_ext(reader);
	ext = nds_obj_handle_to_process_info_ext(obj);
	CHECK(ext && strncmp(ext->tag, "sdk-program, pid ", 17) == 0);
	CHECK(nds_obj_delete(obj) == 0);

	CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
	CHECK(count == MODELS);
	for (i = 0; i < count; i++) {
		nds_model_node_info_t *node = nds_obj_handle_to_model_node_info(models[i]);
		nds_model_node_mem_usage_info_t *usage =
			nds_obj_handle_to_model_node_mem_usage(models[i]);
		char name[32], uuid[16];

		CHECK(node != NULL && usage != NULL);
		if (!node || !usage)
			continue;
		snprintf(name, sizeof(name), NAME_FORMAT, node->model_id);
		model_uuid(uuid, node->model_id);
		CHECK(strcmp(node->name, name) == 0 && memcmp(node->uuid, uuid, 16) == 0);
		CHECK(node->model_node_id == 100 + node->model_id);
		CHECK(usage->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].total_size ==
		      4096 * (size_t)node->model_id);
	}
	/* A monitor changes nothing. */
	value = 9;
	CHECK(nds_increment_nc_counter(reader, 1, NDS_NC_COUNTER_INFER_COMPLETED, 1) == -EPERM);
	CHECK(nds_set_nd_counter(reader, NDS_ND_COUNTER_RUNTIME_VERSION, &value) == -EPERM);
	if (count > 0)
		CHECK(nds_obj_commit(models[0]) == -EPERM);
	free_models(models, count);
	CHECK(model_count(reader) == MODELS);

	CHECK(nds_close(reader) == 0);
	CHECK(ndl_close_device(device) == 0);
}

/* Runs the monitor in a child; its failures count here. */
static void run_monitor(void)
{
	pid_t producer_pid = getpid(), child;
	int status = 0;

	fflush(NULL);
	child = fork();
	if (child == 0) {
		passed = failed = 0;
		monitor(producer_pid);
		printf("monitor: %d passed, %d failed\n", passed, failed);
		fflush(NULL);
		_exit(failed == 0 ? 0 : 1);
	}
	CHECK(child > 0);
	if (child <= 0)
		return;
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	ndl_device_init_param_t params;
	ndl_device_t *device = NULL;
	nds_instance_t *producer = NULL;
	nds_obj_handle_t created[MODELS], spare = NULL;
	unsigned int i;

	memset(&params, 0, sizeof(params));
	params.num_dram_regions = 1;
	CHECK(ndl_open_device(0, &params, &device) == 0);
	if (!device)
		goto out;
	CHECK(device->device_index == 0);
	CHECK(nds_open(device, 0, &producer) == 0);
	if (!producer)
		goto close_device;

	publish(producer);
	load_models(producer, created, &spare);

	/* Freeing the producer's own read copies deletes nothing. */
	CHECK(model_count(producer) == MODELS);
	CHECK(model_count(producer) == MODELS);

	run_monitor();

	/* Unloading a model frees its slot, which the spare model then takes. */
	CHECK(nds_obj_delete(created[10]) == 0);
	CHECK(model_count(producer) == MODELS - 1);
	CHECK(nds_obj_commit(spare) == 0);
	CHECK(model_count(producer) == MODELS);
	created[10] = spare;
	for (i = 0; i < MODELS; i++)
		CHECK(nds_obj_delete(created[i]) == 0);
	CHECK(model_count(producer) == 0);

	CHECK(nds_close(producer) == 0);
close_device:
	CHECK(ndl_close_device(device) == 0);
out:
	printf("sdk program: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
