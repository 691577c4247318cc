/* gidtable: prints the indexes ibv_query_gid_table returns for the first device,
 * "n=N: I I ...", for TestVerbsPortEvents. */
#include <stdio.h>
#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_gid_entry e[64];
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	ssize_t n, i;

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0]))) {
		fprintf(stderr, "no device\n");
		return 1;
	}
	n = ibv_query_gid_table(ctx, e, 64, 0);
	if (n < 0) {
		fprintf(stderr, "ibv_query_gid_table: %zd\n", n);
		return 1;
	}
	printf("n=%zd:", n);
	for (i = 0; i < n; i++)
		printf(" %u", e[i].gid_index);
	printf("\n");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
