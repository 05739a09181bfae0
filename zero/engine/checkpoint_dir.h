// A checkpoint's directory and its life: the names (checkpoint_<s>/, its
// .tmp while the ranks write it, .old while a resave replaces it), the steps a
// directory holds, verification against the MANIFEST and the choice of the
// newest checkpoint that verifies, the publication (manifest, then one rename),
// and who may write into an output directory. The files inside and what they
// hold are zero/engine/checkpoint.h's.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/base/hash64.h"
#include "zero/engine/checkpoint_manifest.h"

inline std::string checkpoint_dir(const std::string& output_dir, int step) {
    return output_dir + strf("/checkpoint_%08d", step);
}
inline std::string optim_file(const std::string& dir, int rank) { return dir + strf("/optim_rank%05d.bin", rank); }

inline std::string checkpoint_staging_dir(const std::string& output_dir, int step) {
    return checkpoint_dir(output_dir, step) + ".tmp";
}

// The names of every entry of output_dir a save made: checkpoint_<step>[.tmp|.old].
inline std::vector<std::string> checkpoint_entries(const std::string& output_dir) {
    std::vector<std::string> names;
    DIR* d = opendir(output_dir.c_str());
    if (!d) return names;
    while (dirent* e = readdir(d)) {
        int step, used = 0;
        if (sscanf(e->d_name, "checkpoint_%d%n", &step, &used) != 1 || step < 0) continue;
        std::string name = e->d_name, rest = name.substr((size_t)used);
        if (name.substr(0, used) == checkpoint_dir("", step).substr(1) && (rest.empty() || rest == ".tmp" || rest == ".old"))
            names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

// The steps of every directory in output_dir named exactly checkpoint_<step>
// (not .tmp, not .old), newest first; complete or not.
inline std::vector<int> checkpoint_steps(const std::string& output_dir) {
    std::vector<int> steps;
    for (const std::string& name : checkpoint_entries(output_dir))
        if (name.find('.') == std::string::npos) steps.push_back(atoi(name.c_str() + strlen("checkpoint_")));
    std::sort(steps.rbegin(), steps.rend());
    return steps;
}

// rm -rf path (a checkpoint's directory: plain files, one level)
inline void remove_tree(const std::string& path) {
    DIR* d = opendir(path.c_str());
    if (!d) {
        unlink(path.c_str());
        return;
    }
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::string child = path + "/" + name;
        struct stat st;
        if (lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(child);
        else unlink(child.c_str());
    }
    closedir(d);
    CHECK(rmdir(path.c_str()) == 0 || errno == ENOENT, "cannot remove %s: %s", path.c_str(), strerror(errno));
}

// Makes the renames inside a directory durable.
inline void sync_dir(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

// The checkpoint's manifest, read and parsed; false with why if it is absent or bad.
inline bool read_manifest(const std::string& dir, CheckpointManifest& m, std::string& why) {
    std::string path = dir + "/" + MANIFEST_NAME;
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) return why = "it has no MANIFEST (an incomplete save, or written by an older version)", false;
    std::string text;
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0 && text.size() <= MANIFEST_MAX_BYTES) text.append(buf, got);
    fclose(f);
    return parse_manifest(text, m, why);
}

// The highest step whose directory holds a manifest (not yet verified), or -1.
inline int latest_checkpoint(const std::string& output_dir) {
    for (int step : checkpoint_steps(output_dir)) {
        CheckpointManifest m;
        std::string why;
        if (read_manifest(checkpoint_dir(output_dir, step), m, why)) return step;
    }
    return -1;
}

// Checks every file of checkpoint `dir` (of step `step`) against its manifest:
// present, of the listed size and checksum, and the files a checkpoint of its
// world must hold all listed. False with a one-line why.
inline bool verify_checkpoint(const std::string& dir, int step, CheckpointManifest& m, std::string& why) {
    if (!read_manifest(dir, m, why)) return false;
    if (m.id.step != step) return why = "its manifest is of step " + std::to_string(m.id.step), false;
    std::vector<std::string> needed = {"model.bin", "state.bin"};
    for (int r = 0; r < m.id.world; r++) needed.push_back(optim_file("", r).substr(1));
    for (const std::string& n : needed)
        if (!m.find(n)) return why = "its manifest does not list " + n, false;
    for (const ManifestFile& f : m.files) {
        uint64_t size = 0, hash = 0;
        if (!hash_file(dir + "/" + f.name, size, hash)) return why = f.name + " is missing or unreadable", false;
        if (size != f.size)
            return why = f.name + " has " + std::to_string(size) + " bytes, its manifest says " +
                         std::to_string(f.size), false;
        if (hash != f.hash) return why = f.name + " does not match its checksum (the file was changed or damaged)", false;
    }
    return true;
}

// The newest checkpoint in output_dir that verifies, printing one line for each
// newer one skipped and why; -1 if there is none at all. Checkpoints that exist
// but none of which verifies are an error: nothing is silently started afresh.
inline int select_checkpoint(const std::string& output_dir) {
    std::vector<int> steps = checkpoint_steps(output_dir);
    std::string first_why;
    for (int step : steps) {
        CheckpointManifest m;
        std::string why, dir = checkpoint_dir(output_dir, step);
        if (verify_checkpoint(dir, step, m, why)) return step;
        if (first_why.empty()) first_why = dir + ": " + why;
        printf("note: not resuming from %s: %s\n", dir.c_str(), why.c_str());
    }
    if (!steps.empty())
        fail("no checkpoint in %s verifies (%s); pass --overwrite 1 instead of -y 1 to start afresh",
             output_dir.c_str(), first_why.c_str());
    return -1;
}

// A rank's note of its optimizer file's size and checksum, for rank 0's manifest
// (the ranks may be processes on other hosts: a file in the shared directory is
// what they have in common).
inline std::string checksum_note(const std::string& staging, int rank) {
    std::string path = optim_file(staging, rank);
    return path.replace(path.size() - 4, 4, ".sum");  // optim_rank<r>.sum
}
inline void write_checksum_note(const std::string& staging, int rank) {
    std::string path = optim_file(staging, rank);
    uint64_t size = 0, hash = 0;
    CHECK(hash_file(path, size, hash), "cannot read back %s: %s", path.c_str(), strerror(errno));
    write_file_atomically(checksum_note(staging, rank), strf("%" PRIu64 " %016" PRIx64 "\n", size, hash));
}

// Rank 0, once every rank's files are in the staging directory: the manifest,
// then the rename that publishes the checkpoint as a whole.
inline void publish_checkpoint(const std::string& staging, const std::string& final_dir, const CheckpointIdentity& id) {
    CheckpointManifest m{.id = id};
    for (const char* name : {"model.bin", "state.bin"}) {
        ManifestFile f{name, 0, 0};
        CHECK(hash_file(staging + "/" + name, f.size, f.hash), "cannot read back %s/%s", staging.c_str(), name);
        m.files.push_back(f);
    }
    for (int r = 0; r < id.world; r++) {
        std::string note = checksum_note(staging, r);
        FILE* f = open_file(note, "rb");
        unsigned long long size = 0, hash = 0;
        CHECK(fscanf(f, "%llu %llx", &size, &hash) == 2, "%s is malformed", note.c_str());
        fclose(f);
        m.files.push_back({optim_file("", r).substr(1), size, hash});
        unlink(note.c_str());
    }
    write_file_atomically(staging + "/" + MANIFEST_NAME, m.to_text());
    sync_dir(staging);
    // a checkpoint of this step already there (a resume re-ran past it) is set
    // aside, replaced, then deleted: at no moment does checkpoint_<s>/ hold a mix
    std::string old = final_dir + ".old";
    if (file_exists(final_dir)) {
        remove_tree(old);
        CHECK(rename(final_dir.c_str(), old.c_str()) == 0, "cannot rename %s: %s", final_dir.c_str(), strerror(errno));
    }
    CHECK(rename(staging.c_str(), final_dir.c_str()) == 0, "cannot rename %s to %s: %s", staging.c_str(),
          final_dir.c_str(), strerror(errno));
    sync_dir(final_dir.substr(0, final_dir.rfind('/')));
    remove_tree(old);
}

// Before a run writes into output_dir: a directory that already holds
// checkpoints belongs to another run unless this one resumes it (-y 1), and is
// only written into with --overwrite 1, which deletes them first so no later
// resume can pick up the older run's steps. Rank 0 of the job calls this.
inline void claim_output_dir(const std::string& output_dir, bool resume, bool overwrite) {
    if (output_dir.empty()) return;
    std::vector<std::string> entries = checkpoint_entries(output_dir);
    if (entries.empty()) return;
    if (overwrite) {
        for (const std::string& e : entries) remove_tree(output_dir + "/" + e);
        printf("--overwrite 1: deleted %zu checkpoint entr%s of an earlier run in %s\n", entries.size(),
               entries.size() == 1 ? "y" : "ies", output_dir.c_str());
        return;
    }
    if (resume) {  // keep the checkpoints; only clear what killed saves left
        for (const std::string& e : entries)
            if (e.find('.') != std::string::npos) remove_tree(output_dir + "/" + e);  // .tmp or .old
        return;
    }
    int latest = latest_checkpoint(output_dir);
    fail("%s already holds checkpoints of a run (%s%s): resume it with -y 1, or pass --overwrite 1 to delete them "
         "and start afresh",
         output_dir.c_str(), latest >= 0 ? "the latest of step " : "", latest >= 0 ? std::to_string(latest).c_str() : "incomplete ones");
}
