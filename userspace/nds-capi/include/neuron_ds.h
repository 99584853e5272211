/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Neuron DataStore C API, source-compatible with the Neuron SDK's nrt/nds/neuron_ds.h.
 *
 * Link with -lnds_capi (cdylib) or libnds_capi.a (staticlib).
 *
 * Conventions:
 *   - int-returning functions return 0 on success and a negative errno on failure
 *     (-EINVAL bad argument or NULL pointer, -EPERM mutating through a reader handle,
 *     -ENOSPC all 64 model slots in use, kernel errnos such as -ENOENT passed through).
 *     libnds returned a positive 28 when the model slots were full; this returns -ENOSPC.
 *   - Handle-returning functions return NULL on failure.
 *   - No function ever unwinds into C.
 *
 * ndl_device_t is opaque in the SDK (it belongs to the driver layer), so this library
 * provides its own constructors: nds_device_open() for a kernel device node such as
 * /dev/neuron0, nds_device_open_file() for a slab file (hosts without the driver, tests).
 * A device only names the slab's source; nds_open() does the actual acquire and mmap.
 */
#ifndef NEURON_DS_H
#define NEURON_DS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Object types for nds_obj_new(). */
#define OBJECT_TYPE_MODEL_NODE_INFO 0
#define OBJECT_TYPE_PROCESS_INFO 1
#define OBJECT_TYPE_PROCESS_INFO_EXT 2

#define MODEL_MEM_USAGE_LOCATION_COUNT 2
#define NDS_DMA_MEM_USAGE_SLOT_COUNT 12 /* do not change */

/* Columns of the memory-usage grid. */
#define NDS_DMA_MEM_USAGE_SLOT_CODE 0
#define NDS_DMA_MEM_USAGE_SLOT_TENSORS 1
#define NDS_DMA_MEM_USAGE_SLOT_CONSTANTS 2
#define NDS_DMA_MEM_USAGE_SLOT_SCRATCHPAD 3
#define NDS_DMA_MEM_USAGE_SLOT_MISC 4

typedef void *nds_obj_handle_t;
typedef struct nds_instance nds_instance_t;
typedef struct ndl_device ndl_device_t;

typedef struct nds_mem_usage_info {
	uint64_t total_size;
	uint32_t chunk_count;
} nds_mem_usage_info_t;

typedef struct nds_model_node_info {
	uint32_t model_id;
	uint32_t model_node_id;
	char name[256];
	uint8_t uuid[16];
	uint8_t nc_index;
	uint8_t sg_index;
} nds_model_node_info_t;

typedef struct nds_model_node_mem_usage_info {
	nds_mem_usage_info_t model_mem_usage[MODEL_MEM_USAGE_LOCATION_COUNT][NDS_DMA_MEM_USAGE_SLOT_COUNT];
} nds_model_node_mem_usage_info_t;

typedef struct nds_version_info {
	uint8_t major;
	uint8_t minor;
	uint32_t build;
} nds_version_info_t;

typedef struct nds_process_info {
	int8_t framework_type;
	char tag[32];
	nds_version_info_t framework_version;
	nds_version_info_t fal_version;
	nds_version_info_t runtime_version;
} nds_process_info_t;

typedef struct nds_process_info_ext {
	char tag[256];
} nds_process_info_ext_t;

/* Device constructors (this implementation; see above). NULL on a NULL or non-UTF-8 path. */
ndl_device_t *nds_device_open(const char *path);
ndl_device_t *nds_device_open_file(const char *path);
void nds_device_close(ndl_device_t *device);

/* pid 0: read-write for the current process; pid != 0: read-only view of that process. */
int nds_open(ndl_device_t *device, pid_t pid, nds_instance_t **inst);
/* Mandatory for readers; frees the handle regardless of the result. */
int nds_close(nds_instance_t *inst);

int nds_increment_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t increment);
int nds_decrement_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t decrement);
int nds_get_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t *value);
int nds_set_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t *value);

int nds_increment_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t increment);
int nds_decrement_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t decrement);
/* Sets bit bit_index (< 64) of the counter. */
int nds_or_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t bit_index);
int nds_get_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t *value);
int nds_set_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t *value);

/* Objects: local copies of NDS records. They must not outlive their instance. */
int nds_obj_commit(nds_obj_handle_t obj);
nds_obj_handle_t nds_obj_new(nds_instance_t *inst, int type);
/* Deletes a model from NDS (producer handles) and frees the local object. */
int nds_obj_delete(nds_obj_handle_t obj);

nds_model_node_info_t *nds_obj_handle_to_model_node_info(nds_obj_handle_t obj);
nds_model_node_mem_usage_info_t *nds_obj_handle_to_model_node_mem_usage(nds_obj_handle_t obj);
/* Consistent models only (torn slots are skipped). Free the array with free() and each
 * handle with nds_obj_delete(). */
int nds_read_all_model_nodes(nds_instance_t *inst, nds_obj_handle_t **models, size_t *count);

nds_process_info_t *nds_obj_handle_to_process_info(nds_obj_handle_t obj);
nds_process_info_ext_t *nds_obj_handle_to_process_info_ext(nds_obj_handle_t obj);
/* NULL when the record is empty or was torn on both attempts. */
nds_obj_handle_t nds_read_process_info(nds_instance_t *inst);
nds_obj_handle_t nds_read_process_info_ext(nds_instance_t *inst);

#ifdef __cplusplus
}
#endif

#endif /* NEURON_DS_H */
