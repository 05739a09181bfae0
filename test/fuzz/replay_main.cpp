// A plain main() for a fuzz target: runs LLVMFuzzerTestOneInput once on every
// file named (directories: every file in them, sorted), as libFuzzer would
// replay a corpus. CTest runs it over the committed corpus and crash
// reproducers, so a fixed crash stays fixed without clang in CI. Exit status 0
// when every input was handled (accepted or refused), nonzero otherwise (a
// crash kills the process first).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void collect(const std::string& path, std::vector<std::string>& files) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        files.push_back(path);
        return;
    }
    DIR* d = opendir(path.c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) collect(path + "/" + n, files);
}

int main(int argc, char** argv) {
    std::vector<std::string> files;
    for (int i = 1; i < argc; i++) collect(argv[i], files);
    if (files.empty()) {
        fprintf(stderr, "usage: %s <corpus file or directory>...: no inputs found\n", argv[0]);
        return 2;
    }
    for (const std::string& f : files) {
        FILE* in = fopen(f.c_str(), "rb");
        if (!in) {
            fprintf(stderr, "cannot open %s\n", f.c_str());
            return 1;
        }
        std::vector<uint8_t> bytes;
        uint8_t buf[65536];
        size_t got;
        while ((got = fread(buf, 1, sizeof(buf), in)) > 0) bytes.insert(bytes.end(), buf, buf + got);
        fclose(in);
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    }
    printf("replayed %zu input(s)\n", files.size());
    return 0;
}
