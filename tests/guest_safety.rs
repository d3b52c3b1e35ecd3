//! Safety tests in the guest: hookprof's BPF LSM programs never change a security decision.
