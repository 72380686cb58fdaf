# Sourced by every scripts/gpu-parts/*.sh, with the part's name: the repository root as the
# working folder, the environment every run on a GPU machine keeps (no NVLink multicast), the
# carried build (scripts/prepare-carry.sh) and its libraries, and the folder for the part's
# results (gpu-round.sh gives one; a part run alone makes its own).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD
BUILD=${BUILD:-$ROOT/.carry/build}
LIB=$BUILD/src/preload/libp2pguard.so
RESULTS=${RESULTS:-${OUT:-$(mktemp -d "/tmp/gpu-$1.XXXXXX")}}
mkdir -p "$RESULTS"
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
