// FileSystem seams for the reliability suites: a recorder that logs every path the extension
// stats, opens, reads or lists, and an interceptor that injects faults or mutates the tree at the
// exact moment of one call. Both wrap the extension's own `FileSystem` interface, the only way it
// touches the disk.

import { isAbsolute, relative, resolve, sep } from "node:path";
import { nodeFileSystem, type FileSystem } from "../index.ts";

export type FsMethod = keyof FileSystem;

export interface FsCall {
  method: FsMethod;
  /** The path the call was about; fd-based calls carry the path their fd was opened with. */
  path: string;
}

/** What an interceptor sees: the call, and `proceed` to run it on the wrapped filesystem. */
export type Interceptor = (call: FsCall, proceed: () => unknown) => unknown;

/**
 * Wraps `base` so that every call goes through `interceptor`. fd-based calls (fstat, read, close)
 * are reported with the path their descriptor was opened with.
 */
export function interceptFileSystem(interceptor: Interceptor, base: FileSystem = nodeFileSystem): FileSystem {
  const fdPaths = new Map<number, string>();
  const fdPath = (fd: number) => fdPaths.get(fd) ?? `<fd ${fd}>`;
  return {
    stat: (path) => interceptor({ method: "stat", path }, () => base.stat(path)) as ReturnType<FileSystem["stat"]>,
    lstat: (path) => interceptor({ method: "lstat", path }, () => base.lstat(path)) as ReturnType<FileSystem["lstat"]>,
    realpath: (path) => interceptor({ method: "realpath", path }, () => base.realpath(path)) as string,
    open: (path) => {
      const fd = interceptor({ method: "open", path }, () => base.open(path)) as number;
      fdPaths.set(fd, path);
      return fd;
    },
    fstat: (fd) =>
      interceptor({ method: "fstat", path: fdPath(fd) }, () => base.fstat(fd)) as ReturnType<FileSystem["fstat"]>,
    read: (fd, buffer, offset, length, position) =>
      interceptor({ method: "read", path: fdPath(fd) }, () =>
        base.read(fd, buffer, offset, length, position),
      ) as number,
    close: (fd) => {
      const path = fdPath(fd);
      fdPaths.delete(fd);
      interceptor({ method: "close", path }, () => base.close(fd));
    },
    readdir: (path) =>
      interceptor({ method: "readdir", path }, () => base.readdir(path)) as ReturnType<FileSystem["readdir"]>,
  };
}

export interface Recorder {
  fs: FileSystem;
  calls: FsCall[];
}

/** Records every call, then runs it (through `inner`, so faults and recording can stack). */
export function recordingFileSystem(inner: FileSystem = nodeFileSystem): Recorder {
  const calls: FsCall[] = [];
  const fs = interceptFileSystem((call, proceed) => {
    calls.push(call);
    return proceed();
  }, inner);
  return { fs, calls };
}

/** An error shaped like the ones node:fs throws, message and all (so a leak would show). */
export function fsError(code: string, method: string, path: string): NodeJS.ErrnoException {
  const messages: Record<string, string> = {
    EACCES: "permission denied",
    EIO: "i/o error",
    ENAMETOOLONG: "name too long",
    ELOOP: "too many symbolic links encountered",
    ENOTDIR: "not a directory",
    ENOENT: "no such file or directory",
  };
  const error = new Error(`${code}: ${messages[code] ?? "error"}, ${method} '${path}'`) as NodeJS.ErrnoException;
  error.code = code;
  error.syscall = method;
  error.path = path;
  return error;
}

/** True when `child` is `parent` or lies inside it (both absolute). */
export function insideOrSame(parent: string, child: string): boolean {
  const rel = relative(resolve(parent), resolve(child));
  return rel === "" || (!isAbsolute(rel) && rel.split(sep)[0] !== "..");
}

/**
 * Calls that left the boundary: any path outside `cwdReal`, and any open, read, fstat or
 * readdir of `cwdReal` itself or outside it. `alsoAllowed` lists paths (a symlinked, logical cwd)
 * whose subtree realpath may be asked about. `targets` are the tools' own absolute paths: realpath,
 * a name lookup that opens and lists nothing, may be asked whether they or their folders lead into
 * cwd through a link.
 */
export function callsOutside(
  calls: FsCall[],
  cwdReal: string,
  alsoAllowed: string[] = [],
  targets: string[] = [],
): FsCall[] {
  return calls.filter((call) => {
    if (call.path.startsWith("<fd")) return true;
    const content = call.method === "open" || call.method === "read" || call.method === "fstat";
    if (content) return !(insideOrSame(cwdReal, call.path) && resolve(call.path) !== resolve(cwdReal));
    if (insideOrSame(cwdReal, call.path)) return false;
    if (call.method !== "realpath") return true;
    const lookup = (path: string) => insideOrSame(call.path, path);
    return !(alsoAllowed.some((allowed) => insideOrSame(allowed, call.path)) || targets.some(lookup));
  });
}
