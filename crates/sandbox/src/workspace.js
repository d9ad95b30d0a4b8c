// `workspace`, the guest's view of the workspace's files. Evaluated the first
// time a run's program reads `workspace` (in its own script, so it shifts no
// position of the program's) and called with the built-ins it uses, captured
// before the program ran (so a program that replaces them changes nothing
// here), and the run's functions for file_read, file_write, file_list,
// file_stat, file_mkdir and file_remove (`undefined` for one the run does not
// have). Each method is exactly one call of one of them, so the host's ladder
// decides, counts and scrubs it like any other tool call.
(function (originals, fileRead, fileWrite, fileList, fileStat, fileMkdir, fileRemove) {
  "use strict";
  const { freeze, isArray, NoTool } = originals;

  const call = (tool, method, name, args) => {
    if (tool === undefined) {
      throw new NoTool(`workspace.${method} needs tools.${name}, which this run does not have`);
    }
    return tool(args);
  };
  const object = (value) => (value !== null && typeof value === "object" ? value : {});
  // The file tools' own shapes and names (snake_case, as every tool
  // answers): `stat` is `file_stat`'s, `list` is `file_list`'s `entries`.
  const stat = (reply) => {
    const found = object(reply);
    return {
      path: found.path,
      exists: found.exists === true,
      is_file: found.is_file === true,
      is_dir: found.is_dir === true,
      size: typeof found.size === "number" ? found.size : 0,
      modified_ms: typeof found.modified_ms === "number" ? found.modified_ms : null,
    };
  };
  const entry = (reply) => {
    const found = object(reply);
    return {
      name: found.name,
      path: found.path,
      is_dir: found.is_dir === true,
      size: typeof found.size === "number" ? found.size : 0,
      modified_ms: typeof found.modified_ms === "number" ? found.modified_ms : null,
    };
  };

  const workspace = {
    __proto__: null,
    async read(path) {
      return object(await call(fileRead, "read", "file_read", { path })).content;
    },
    async write(path, content) {
      return stat(await call(fileWrite, "write", "file_write", { path, content }));
    },
    async list(path = "") {
      const entries = object(await call(fileList, "list", "file_list", { path })).entries;
      const listed = [];
      if (isArray(entries)) {
        for (let index = 0; index < entries.length; index += 1) {
          listed[index] = entry(entries[index]);
        }
      }
      return listed;
    },
    async stat(path) {
      return stat(await call(fileStat, "stat", "file_stat", { path }));
    },
    async mkdir(path) {
      await call(fileMkdir, "mkdir", "file_mkdir", { path });
    },
    async remove(path) {
      await call(fileRemove, "remove", "file_remove", { path });
    },
  };
  // Not a loop over an array: the program may have replaced its iterator.
  freeze(workspace.read);
  freeze(workspace.write);
  freeze(workspace.list);
  freeze(workspace.stat);
  freeze(workspace.mkdir);
  freeze(workspace.remove);
  return freeze(workspace);
})
