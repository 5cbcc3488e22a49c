/* The Open MPI peer for bench_allreduce and bench_allreduce_nodes: MPI_Allreduce (float sum, in place)
 * over the same sizes and repetition counts, median time per size, as JSON. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) printf("{\"impl\": \"openmpi\", \"ranks\": %d, \"rows\": [", size);
    int first = 1;
    /* The largest size: argv[1] bytes if given (bench/allreduce_nodes.sh: 64 MiB), else 256 MiB. */
    const size_t largest = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : ((size_t)256 << 20);
    for (size_t bytes = 1024; bytes <= largest; bytes *= 4) {
        size_t n = bytes / sizeof(float);
        float* data = malloc(bytes);
        for (size_t i = 0; i < n; ++i) data[i] = 1.0f;
        size_t reps = ((size_t)256 << 20) / bytes;
        if (reps < 7) reps = 7;
        if (reps > 301) reps = 301;
        double* t = malloc(reps * sizeof(double));
        MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
        for (size_t r = 0; r < reps; ++r) {
            double a = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[r] = MPI_Wtime() - a;
        }
        qsort(t, reps, sizeof(double), cmp);
        if (rank == 0) printf("%s{\"bytes\": %zu, \"mpi_s\": %.9f}", first ? "" : ", ", bytes, t[reps / 2]);
        first = 0;
        free(t);
        free(data);
    }
    if (rank == 0) printf("]}\n");
    MPI_Finalize();
    return 0;
}
