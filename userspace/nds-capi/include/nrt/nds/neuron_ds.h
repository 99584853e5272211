/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Neuron DataStore C API: a superset of the Neuron SDK's nrt/nds/neuron_ds.h. Every type,
 * constant and function of the SDK header is declared here with the same name, type and
 * value, so an SDK program builds unchanged with -I <this include directory> and links with
 * -lnds_capi (libnds_capi.so) or libnds_capi.a. It gets its device as SDK code does, with
 * ndl_open_device() from <ndl/ndl.h> (included below).
 *
 * Return values (libnds's):
 *   - 0 on success.
 *   - A negative errno on failure: -EINVAL for a NULL pointer, a bad index, bit, pid or object
 *     type, or a slab whose header is not a committed datastore's; -EPERM for a mutator or a
 *     commit through a reader instance; -ENOMEM when memory runs out; the driver's or the
 *     system's errno otherwise, e.g. -ENOENT from nds_open() when that pid has no datastore.
 *   - One positive value: nds_obj_commit() returns 28 (ENOSPC) when a new model finds all 64
 *     model slots in use, as libnds does. Test results with "!= 0", not "< 0".
 *   - Handle-returning functions return NULL on failure.
 * No function ever unwinds into C; an internal failure would return -EIO.
 *
 * Objects. An nds_obj_handle_t is a local copy of one record. It belongs to the instance it
 * came from and must be freed with nds_obj_delete() before that instance is closed. There are
 * two kinds, and nds_obj_delete() treats them differently:
 *   - Created objects, from nds_obj_new(). Fill them through nds_obj_handle_to_*() and publish
 *     them with nds_obj_commit() (producer instances only). A model takes a free slot on its
 *     first commit and rewrites that slot on every later one. nds_obj_delete() of a created
 *     model committed through a producer instance removes the model from the datastore (its
 *     record is zeroed and its slot freed), then frees the object: this is how a producer
 *     unloads a model. Process records are never removed, only overwritten, so deleting a
 *     process-info object only frees it.
 *   - Read copies, from nds_read_all_model_nodes(), nds_read_process_info() and
 *     nds_read_process_info_ext(). nds_obj_delete() of a read copy only frees the copy: it
 *     never changes the datastore, through a producer instance or a reader instance alike.
 *     nds_obj_commit() of a read copy through a producer instance writes the copy (edited or
 *     not) back over the record it was read from (-EINVAL if that model's slot has been freed
 *     since); through a reader instance it fails with -EPERM.
 */
#ifndef NRT_NDS_NEURON_DS_H
#define NRT_NDS_NEURON_DS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ndl/ndl.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *nds_obj_handle_t;

/* Object types for nds_obj_new(). */
#define OBJECT_TYPE_MODEL_NODE_INFO (0)
#define OBJECT_TYPE_PROCESS_INFO (1)
#define OBJECT_TYPE_PROCESS_INFO_EXT (2)

/* Rows of a model's memory-usage grid (host and device). */
#define MODEL_MEM_USAGE_LOCATION_COUNT 2

/* Columns of the memory-usage grid: usage types, aggregated into 12 fixed slots. */
enum {
	NDS_DMA_MEM_USAGE_SLOT_CODE,
	NDS_DMA_MEM_USAGE_SLOT_TENSORS,
	NDS_DMA_MEM_USAGE_SLOT_CONSTANTS,
	NDS_DMA_MEM_USAGE_SLOT_SCRATCHPAD,
	NDS_DMA_MEM_USAGE_SLOT_MISC,
	NDS_DMA_MEM_USAGE_SLOT_COUNT = 12 /* part of the slab format: never changes */
};

/* Total size and chunk count of one type of memory in one location. */
typedef struct nds_mem_usage_info {
	size_t total_size;
	uint32_t chunk_count;
} nds_mem_usage_info_t;

/* A loaded model node. name and uuid are plain bytes; name is NUL-terminated by convention. */
typedef struct nds_model_node_info {
	uint32_t model_id;
	uint32_t model_node_id;
	char name[256];
	char uuid[16];
	uint8_t nc_index;
	uint8_t sg_index;
} nds_model_node_info_t;

/* A model node's memory usage: [location][NDS_DMA_MEM_USAGE_SLOT_*]. */
typedef struct nds_model_node_mem_usage_info {
	nds_mem_usage_info_t model_mem_usage[MODEL_MEM_USAGE_LOCATION_COUNT][NDS_DMA_MEM_USAGE_SLOT_COUNT];
} nds_model_node_mem_usage_info_t;

typedef struct nds_version_info {
	uint8_t major;
	uint8_t minor;
	uint32_t build;
} nds_version_info_t;

/* The process record: framework, tag and the versions of the software stack. */
typedef struct nds_process_info {
	int8_t framework_type;
	char tag[32];
	nds_version_info_t framework_version;
	nds_version_info_t fal_version;
	nds_version_info_t runtime_version;
} nds_process_info_t;

/* The extended process record: the full process tag (up to 255 characters and a NUL). */
typedef struct nds_process_info_ext {
	char tag[256];
} nds_process_info_ext_t;

typedef struct nds_instance nds_instance_t;
typedef struct ndl_device ndl_device_t;

/* Bits of the ND counter NDS_ND_COUNTER_FEATURE_BITMAP, set with nds_or_nd_counter(). */
typedef enum feature_bitmap_bit_index {
	BIT_INDEX_TEST_FEATURE = 0,
	BIT_INDEX_MULTICORE_FEATURE = 1,
	BIT_INDEX_COUNT = BIT_INDEX_MULTICORE_FEATURE + 1
} feature_bitmap_bit_index_t;

/*
 * Opens the datastore of pid on device into *inst. pid 0: the calling process's own, read-write
 * (a producer instance; writes the slab header). Any other pid: that process's, read-only (a
 * reader instance; -EINVAL if its header is not committed). Negative pids give -EINVAL.
 */
int nds_open(ndl_device_t *device, pid_t pid, nds_instance_t **inst);
/* Unmaps and releases the datastore and frees inst, whatever the result. Readers must call it. */
int nds_close(nds_instance_t *inst);

/*
 * NeuronCore counters: pnc_index 0-15, counter_index below NDS_TOTAL_NC_COUNTER_COUNT (an
 * NDS_NC_COUNTER_* or NDS_EXT_NC_COUNTER_* index, or a reserved one). Increments and
 * decrements wrap. set takes the value by pointer, as in the SDK.
 */
int nds_increment_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t increment);
int nds_decrement_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t decrement);
int nds_get_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t *value);
int nds_set_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t *value);

/* Device counters: counter_index below NDS_ND_COUNTER_COUNT. */
int nds_increment_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t increment);
int nds_decrement_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t decrement);
/* ORs 1ull << bit_index into the counter; bit_index must be below 64. */
int nds_or_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t bit_index);
int nds_get_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t *value);
int nds_set_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t *value);

/* Objects: see "Objects" at the top of this file for their kinds and lifetimes. */
/* Publishes obj; +28 when a new model finds no free slot. */
int nds_obj_commit(nds_obj_handle_t obj);
/* A new zeroed created object of type OBJECT_TYPE_*; NULL for a bad instance or type. */
nds_obj_handle_t nds_obj_new(nds_instance_t *inst, int type);
/* Frees obj; removes a committed created model from the datastore (producer instances). */
int nds_obj_delete(nds_obj_handle_t obj);

/* Views into an object, valid until it is deleted; NULL for NULL or another type. */
nds_model_node_info_t *nds_obj_handle_to_model_node_info(nds_obj_handle_t obj);
nds_model_node_mem_usage_info_t *nds_obj_handle_to_model_node_mem_usage(nds_obj_handle_t obj);

/*
 * Read copies of every model currently in the datastore, in slot order, in a malloc'ed array of
 * *count handles (*models NULL and *count 0 when there are none). A model being rewritten on
 * both read attempts is left out. Free each handle with nds_obj_delete(), which leaves the
 * datastore alone, then the array with free().
 */
int nds_read_all_model_nodes(nds_instance_t *inst, nds_obj_handle_t **models, size_t *count);

nds_process_info_t *nds_obj_handle_to_process_info(nds_obj_handle_t obj);
nds_process_info_ext_t *nds_obj_handle_to_process_info_ext(nds_obj_handle_t obj);
/* A read copy of the record; NULL when none was published or it was torn on both attempts. */
nds_obj_handle_t nds_read_process_info(nds_instance_t *inst);
nds_obj_handle_t nds_read_process_info_ext(nds_instance_t *inst);

/*
 * Extensions of this library, not in the SDK: devices by path. nds_device_open() opens a device
 * node at any path (for a module loaded with another node name) the way ndl_open_device() does;
 * NULL with errno set on failure. nds_device_open_file() names a slab file instead, for hosts
 * without the driver and for tests: a producer creates it, a reader needs it to exist; NULL for
 * a NULL or non-UTF-8 path. Both set device_index to 0. Free either with ndl_close_device().
 */
ndl_device_t *nds_device_open(const char *path);
ndl_device_t *nds_device_open_file(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NDS_NEURON_DS_H */
