"""torchrun's side of bench/launch.sh: join the gloo process group, meet in a
barrier, print the wall-clock time just after it."""
import time

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
print(f"ready_unix_ns {time.time_ns()}", flush=True)
dist.barrier()  # gloo can deadlock in teardown without a last barrier
dist.destroy_process_group()
