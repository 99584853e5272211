// SPDX-License-Identifier: GPL-2.0-only
/*
 * Exercises the C API (userspace/nds-capi) over a slab file, argument checks and return values
 * included; tests/c/nds_sdk_program.c is the SDK-only program run against the module. Built by
 * userspace/nds-capi/tests/c_program.rs, which defines NDL_CONTEXT_OFFSET as the library's
 * offset of ndl_device_t.context. Prints one line per failed check and a final
 * "c api: N passed, N failed" line; exits non-zero on any failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nrt/nds/neuron_ds.h>

_Static_assert(sizeof(nds_mem_usage_info_t) == 16, "nds_mem_usage_info_t");
_Static_assert(sizeof(nds_model_node_info_t) == 284, "nds_model_node_info_t");
_Static_assert(sizeof(nds_model_node_mem_usage_info_t) == 384, "mem usage grid");
_Static_assert(sizeof(nds_version_info_t) == 8, "nds_version_info_t");
_Static_assert(sizeof(nds_process_info_t) == 60, "nds_process_info_t");
_Static_assert(sizeof(nds_process_info_ext_t) == 256, "nds_process_info_ext_t");
/* The library lays out ndl_device_t itself: its context must start where the header's does. */
_Static_assert(offsetof(ndl_device_t, context) == NDL_CONTEXT_OFFSET, "ndl_device_t.context");

static int passed, failed;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (cond) {                                                      \
			passed++;                                                \
		} else {                                                         \
			failed++;                                                \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
		}                                                                \
	} while (0)

static void test_counters(nds_instance_t *producer, nds_instance_t *reader)
{
	uint64_t value = 0;

	CHECK(nds_increment_nc_counter(producer, 0, 1, 5) == 0);
	CHECK(nds_decrement_nc_counter(producer, 0, 1, 2) == 0);
	CHECK(nds_get_nc_counter(reader, 0, 1, &value) == 0 && value == 3);
	value = 42;
	CHECK(nds_set_nc_counter(producer, 15, 94, &value) == 0);
	value = 0;
	CHECK(nds_get_nc_counter(reader, 15, 94, &value) == 0 && value == 42);
	CHECK(nds_increment_nc_counter(producer, 3, 40, 1) == 0);
	CHECK(nds_get_nc_counter(reader, 3, 40, &value) == 0 && value == 1);

	CHECK(nds_increment_nd_counter(producer, 0, 10) == 0);
	CHECK(nds_decrement_nd_counter(producer, 0, 4) == 0);
	CHECK(nds_get_nd_counter(reader, 0, &value) == 0 && value == 6);
	value = 7;
	CHECK(nds_set_nd_counter(producer, 30, &value) == 0);
	CHECK(nds_get_nd_counter(reader, 30, &value) == 0 && value == 7);
	CHECK(nds_or_nd_counter(producer, 3, 0) == 0);
	CHECK(nds_or_nd_counter(producer, 3, 63) == 0);
	CHECK(nds_get_nd_counter(reader, 3, &value) == 0 && value == (1ull | 1ull << 63));

	/* Bad indices, bits and pointers. */
	CHECK(nds_increment_nc_counter(producer, -1, 0, 1) == -EINVAL);
	CHECK(nds_increment_nc_counter(producer, 16, 0, 1) == -EINVAL);
	CHECK(nds_increment_nc_counter(producer, 0, 95, 1) == -EINVAL);
	CHECK(nds_get_nc_counter(reader, 4, 95, &value) == -EINVAL);
	CHECK(nds_increment_nd_counter(producer, 31, 1) == -EINVAL);
	CHECK(nds_or_nd_counter(producer, 3, 64) == -EINVAL);
	CHECK(nds_get_nd_counter(reader, 0, NULL) == -EINVAL);
	CHECK(nds_set_nd_counter(producer, 0, NULL) == -EINVAL);
	CHECK(nds_set_nc_counter(producer, 0, 0, NULL) == -EINVAL);
	CHECK(nds_get_nd_counter(NULL, 0, &value) == -EINVAL);
	CHECK(nds_increment_nc_counter(NULL, 0, 0, 1) == -EINVAL);

	/* Readers never mutate. */
	value = 1;
	CHECK(nds_increment_nc_counter(reader, 0, 1, 1) == -EPERM);
	CHECK(nds_decrement_nc_counter(reader, 0, 1, 1) == -EPERM);
	CHECK(nds_set_nc_counter(reader, 0, 1, &value) == -EPERM);
	CHECK(nds_increment_nd_counter(reader, 0, 1) == -EPERM);
	CHECK(nds_decrement_nd_counter(reader, 0, 1) == -EPERM);
	CHECK(nds_or_nd_counter(reader, 3, 1) == -EPERM);
	CHECK(nds_set_nd_counter(reader, 0, &value) == -EPERM);
}

static void test_process_records(nds_instance_t *producer, nds_instance_t *reader)
{
	nds_obj_handle_t obj, copy;
	nds_process_info_t *info;
	nds_process_info_ext_t *ext;

	CHECK(nds_read_process_info(reader) == NULL); /* nothing published yet */

	obj = nds_obj_new(producer, OBJECT_TYPE_PROCESS_INFO);
	CHECK(obj != NULL);
	info = nds_obj_handle_to_process_info(obj);
	CHECK(info != NULL);
	CHECK(nds_obj_handle_to_process_info_ext(obj) == NULL);
	CHECK(nds_obj_handle_to_model_node_info(obj) == NULL);
	if (info) {
		info->framework_type = 2;
		strcpy(info->tag, "c-api-test");
		info->runtime_version.major = 2;
		info->runtime_version.build = 31;
	}
	CHECK(nds_obj_commit(obj) == 0);
	CHECK(nds_obj_delete(obj) == 0);

	copy = nds_read_process_info(reader);
	CHECK(copy != NULL);
	info = nds_obj_handle_to_process_info(copy);
	CHECK(info && strcmp(info->tag, "c-api-test") == 0);
	CHECK(info && info->framework_type == 2 && info->runtime_version.build == 31);
	CHECK(nds_obj_commit(copy) == -EPERM); /* a reader's copy cannot be published */
	CHECK(nds_obj_delete(copy) == 0);

	obj = nds_obj_new(producer, OBJECT_TYPE_PROCESS_INFO_EXT);
	ext = nds_obj_handle_to_process_info_ext(obj);
	CHECK(ext != NULL);
	if (ext) {
		memset(ext->tag, 'x', 255);
		ext->tag[255] = '\0';
	}
	CHECK(nds_obj_commit(obj) == 0);
	CHECK(nds_obj_delete(obj) == 0);
	copy = nds_read_process_info_ext(reader);
	ext = nds_obj_handle_to_process_info_ext(copy);
	CHECK(ext && strlen(ext->tag) == 255 && ext->tag[254] == 'x');
	CHECK(nds_obj_delete(copy) == 0);

	CHECK(nds_obj_new(producer, 3) == NULL);
	CHECK(nds_obj_new(producer, -1) == NULL);
	CHECK(nds_obj_new(NULL, OBJECT_TYPE_PROCESS_INFO) == NULL);
	CHECK(nds_obj_commit(NULL) == -EINVAL);
	CHECK(nds_obj_delete(NULL) == -EINVAL);
	CHECK(nds_obj_handle_to_process_info(NULL) == NULL);
	CHECK(nds_read_process_info(NULL) == NULL);
}

static void test_models(nds_instance_t *producer, nds_instance_t *reader)
{
	nds_obj_handle_t objs[64], extra, *models = NULL;
	size_t count = 99, i;
	int committed = 0;

	CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
	CHECK(count == 0 && models == NULL);

	for (i = 0; i < 64; i++) {
		nds_model_node_info_t *node;
		nds_model_node_mem_usage_info_t *usage;

		objs[i] = nds_obj_new(producer, OBJECT_TYPE_MODEL_NODE_INFO);
		node = nds_obj_handle_to_model_node_info(objs[i]);
		usage = nds_obj_handle_to_model_node_mem_usage(objs[i]);
		if (!node || !usage)
			continue;
		node->model_id = (uint32_t)i;
		snprintf(node->name, sizeof(node->name), "model-%zu", i);
		node->nc_index = (uint8_t)(i % 16);
		usage->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].total_size = 4096 * i;
		usage->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].chunk_count = (uint32_t)i;
		committed += nds_obj_commit(objs[i]) == 0;
	}
	CHECK(committed == 64);

	extra = nds_obj_new(producer, OBJECT_TYPE_MODEL_NODE_INFO);
	CHECK(nds_obj_commit(extra) == ENOSPC); /* positive, as libnds returns it */
	CHECK(nds_obj_commit(extra) == ENOSPC); /* and still no slot taken */

	CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
	CHECK(count == 64);
	for (i = 0; i < count; i++) {
		nds_model_node_info_t *node = nds_obj_handle_to_model_node_info(models[i]);
		nds_model_node_mem_usage_info_t *usage =
			nds_obj_handle_to_model_node_mem_usage(models[i]);
		char expected[32];

		snprintf(expected, sizeof(expected), "model-%u", node ? node->model_id : 0);
		CHECK(node && strcmp(node->name, expected) == 0);
		CHECK(node && usage &&
		      usage->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].total_size ==
			      4096ull * node->model_id);
		CHECK(nds_obj_delete(models[i]) == 0); /* frees the reader's copy only */
	}
	free(models);

	/* The producer's own read copies: freeing them leaves every model in place. */
	CHECK(nds_read_all_model_nodes(producer, &models, &count) == 0);
	CHECK(count == 64);
	for (i = 0; i < count; i++)
		CHECK(nds_obj_delete(models[i]) == 0);
	free(models);
	CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
	CHECK(count == 64);
	for (i = 0; i < count; i++)
		nds_obj_delete(models[i]);
	free(models);

	/* A producer's read copy, edited and committed, rewrites the slot it was read from. */
	CHECK(nds_read_all_model_nodes(producer, &models, &count) == 0);
	CHECK(count == 64);
	if (count == 64) {
		nds_model_node_info_t *node = nds_obj_handle_to_model_node_info(models[5]);
		uint32_t model_id = node ? node->model_id : 0;

		if (node)
			strcpy(node->name, "renamed");
		CHECK(nds_obj_commit(models[5]) == 0);
		for (i = 0; i < count; i++)
			nds_obj_delete(models[i]);
		free(models);
		CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
		CHECK(count == 64);
		for (i = 0; i < count; i++) {
			node = nds_obj_handle_to_model_node_info(models[i]);
			if (node && node->model_id == model_id)
				CHECK(strcmp(node->name, "renamed") == 0);
		}
		/* A reader's copy cannot be published. */
		CHECK(nds_obj_commit(models[0]) == -EPERM);
	}
	for (i = 0; i < count; i++)
		nds_obj_delete(models[i]);
	free(models);

	/* Deleting through the producer frees the slot, which the spare object then takes. */
	CHECK(nds_obj_delete(objs[10]) == 0);
	CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
	CHECK(count == 63);
	for (i = 0; i < count; i++)
		nds_obj_delete(models[i]);
	free(models);
	CHECK(nds_obj_commit(extra) == 0);
	CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
	CHECK(count == 64);
	for (i = 0; i < count; i++)
		nds_obj_delete(models[i]);
	free(models);

	CHECK(nds_read_all_model_nodes(reader, NULL, &count) == -EINVAL);
	CHECK(nds_read_all_model_nodes(reader, &models, NULL) == -EINVAL);
	CHECK(nds_read_all_model_nodes(NULL, &models, &count) == -EINVAL);

	for (i = 0; i < 64; i++)
		if (i != 10)
			CHECK(nds_obj_delete(objs[i]) == 0);
	CHECK(nds_obj_delete(extra) == 0);
	CHECK(nds_read_all_model_nodes(reader, &models, &count) == 0);
	CHECK(count == 0);
}

/* ndl_open_device() and ndl_close_device(): arguments and errors (no module on this host). */
static void test_ndl_devices(void)
{
	ndl_device_init_param_t params;
	ndl_device_t *device = NULL;

	memset(&params, 0, sizeof(params));
	errno = 0;
	CHECK(ndl_open_device(-1, &params, &device) == -1 && errno == EINVAL && device == NULL);
	errno = 0;
	CHECK(ndl_open_device(MAX_NEURON_DEVICE_COUNT, &params, &device) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(ndl_open_device(0, &params, NULL) == -1 && errno == EINVAL);
	if (access(NEURON_DEVICE_PREFIX "63", F_OK) != 0) {
		errno = 0;
		CHECK(ndl_open_device(63, NULL, &device) == -1 && errno == ENOENT && device == NULL);
	}
	errno = 0;
	CHECK(ndl_close_device(NULL) == -1 && errno == EINVAL);
}

/* The nds_device_open*() extensions: the handle's SDK fields, and errors by path. */
static void test_path_devices(const char *dir)
{
	char missing[96], regular[96];
	ndl_device_t *device;
	nds_instance_t *unused = NULL;
	int fd;

	snprintf(missing, sizeof(missing), "%s/absent", dir);
	snprintf(regular, sizeof(regular), "%s/regular", dir);

	CHECK(nds_device_open(NULL) == NULL);
	CHECK(nds_device_open_file(NULL) == NULL);

	/* A reader before any producer: no header, no slab. */
	device = nds_device_open_file(missing);
	CHECK(device != NULL);
	if (device) {
		CHECK(device->device_index == 0 && device->connected_device_count == 0);
		CHECK(((ndl_device_context_t *)device->context)->nd_fd == -1);
		CHECK(nds_open(device, 1234, &unused) == -ENOENT);
		CHECK(ndl_close_device(device) == 0);
	}

	/* A device node path is opened at once: a missing one fails there, with errno set. */
	errno = 0;
	CHECK(nds_device_open(missing) == NULL && errno == ENOENT);
	/* A file that opens but is no device node: the driver's ioctl errno comes back. */
	fd = open(regular, O_CREAT | O_RDWR, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	device = nds_device_open(regular);
	CHECK(device != NULL);
	if (device) {
		CHECK(((ndl_device_context_t *)device->context)->nd_fd >= 0);
		CHECK(nds_open(device, 0, &unused) == -ENOTTY);
		CHECK(ndl_close_device(device) == 0);
	}
	unlink(regular);
}

int main(void)
{
	char dir_template[] = "/tmp/nds-capi-XXXXXX";
	char slab[64];
	ndl_device_t *file_device;
	nds_instance_t *producer = NULL, *reader = NULL;

	if (!mkdtemp(dir_template)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(slab, sizeof(slab), "%s/slab", dir_template);

	test_ndl_devices();
	test_path_devices(dir_template);

	file_device = nds_device_open_file(slab);
	CHECK(file_device != NULL);
	CHECK(nds_open(NULL, 0, &producer) == -EINVAL);
	CHECK(nds_open(file_device, 0, NULL) == -EINVAL);
	CHECK(nds_open(file_device, -5, &producer) == -EINVAL);
	CHECK(nds_open(file_device, 0, &producer) == 0);
	CHECK(nds_open(file_device, getpid(), &reader) == 0);

	if (producer && reader) {
		test_counters(producer, reader);
		test_process_records(producer, reader);
		test_models(producer, reader);
	}

	CHECK(nds_close(reader) == 0);
	CHECK(nds_close(producer) == 0);
	CHECK(nds_close(NULL) == -EINVAL);
	CHECK(ndl_close_device(file_device) == 0);

	unlink(slab);
	rmdir(dir_template);
	printf("c api: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
