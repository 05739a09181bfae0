// The README's commands, checked, so the documentation cannot drift from the
// program. Every line of a ```sh block in README.md is a command a user may
// type from the repository's root; each is checked by what it runs:
//
//   make TARGET...              each target exists (make -n)
//   ./train_gpt2_zero[_cpu] ... every flag is one --help lists; and a CPU-build
//                               line that is not under a launcher runs, on a
//                               tiny model (GPT-2's vocabulary, 4 layers) at
//                               T 32 without validation or samples (the model
//                               stays if it is a file), in a scratch folder where the block's
//                               earlier lines ran (so a resume finds its
//                               checkpoint), and must exit 0
//   mpirun/srun/torchrun-style  the flags, as above (one GPU per rank: not here)
//   build/reproduce ...         every flag is one its --help lists
//   build/prepare_data ...      runs, in the block's scratch folder (which
//                               holds a my_text.txt), and must exit 0
//   sh|bash dev/SCRIPT          the script exists and parses (sh -n)
//   huggingface-cli, ctest      other programs' commands: listed, not run
//   anything else               a failure: a new kind of command needs a check here
//
// usage: test_readme_commands <repo root> <build/reproduce, or the tests' build of it>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "test/trainer_harness.h"
#include "zero/base/common.h"

namespace {

struct Command {
    int line;                       // in README.md
    int block;                      // which ```sh block
    std::vector<std::string> env;   // VAR=value before the program
    std::string launcher;           // mpirun, srun, or "" (torchrun-style: RANK=... in env)
    std::vector<std::string> args;  // the program, then its arguments
    std::string text;
};

// Splits a shell line into words: whitespace-separated, "..." and '...' quoted.
std::vector<std::string> shell_words(const std::string& s) {
    std::vector<std::string> words;
    std::string cur;
    bool in_word = false;
    for (size_t i = 0; i < s.size(); i++) {
        char c = s[i];
        if (c == '"' || c == '\'') {
            size_t end = s.find(c, i + 1);
            cur += s.substr(i + 1, (end == std::string::npos ? s.size() : end) - i - 1);
            in_word = true;
            i = end == std::string::npos ? s.size() : end;
        } else if (c == ' ' || c == '\t') {
            if (in_word) words.push_back(cur);
            cur.clear();
            in_word = false;
        } else {
            cur += c;
            in_word = true;
        }
    }
    if (in_word) words.push_back(cur);
    return words;
}

std::vector<Command> readme_commands(const std::string& path) {
    std::vector<Command> out;
    FILE* f = open_file(path, "r");
    char buf[4096];
    int line = 0, block = 0;
    bool in_sh = false;
    std::string pending;  // a line continued with a backslash
    int pending_line = 0;
    while (fgets(buf, sizeof(buf), f)) {
        line++;
        std::string l = buf;
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
        if (!in_sh) {
            if (l == "```sh") in_sh = true, block++;
            continue;
        }
        if (l == "```") {
            in_sh = false;
            continue;
        }
        size_t hash = l.find(" #");  // a comment after the command
        if (hash != std::string::npos) l = l.substr(0, hash);
        if (l.find_first_not_of(' ') == std::string::npos || l[l.find_first_not_of(' ')] == '#') continue;
        if (pending.empty()) pending_line = line;
        if (l.back() == '\\') {
            pending += l.substr(0, l.size() - 1) + " ";
            continue;
        }
        Command c;
        c.line = pending_line, c.block = block, c.text = pending + l;
        pending.clear();
        std::vector<std::string> w = shell_words(c.text);
        size_t i = 0;
        while (i < w.size() && w[i].find('=') != std::string::npos && w[i][0] != '-') c.env.push_back(w[i++]);
        if (i < w.size() && (w[i] == "mpirun" || w[i] == "srun")) {
            c.launcher = w[i++];
            while (i < w.size() && w[i][0] == '-') i += 2;  // -np 8, -n 8
        }
        c.args.assign(w.begin() + i, w.end());
        if (!c.args.empty()) out.push_back(c);
    }
    fclose(f);
    EXPECT(!in_sh, "README.md: a ```sh block is never closed");
    return out;
}

// The flags a program's --help lists ("-b, --micro_batch", "    --ranks", "[-b 1]" ...).
std::set<std::string> help_flags(const std::string& program) {
    std::set<std::string> flags;
    CommandResult r = run_command(program + " --help");
    std::string t;
    for (size_t i = 0; i <= r.output.size(); i++) {  // words split at whitespace only (help text has apostrophes)
        if (i < r.output.size() && !isspace((unsigned char)r.output[i])) {
            t += r.output[i];
            continue;
        }
        while (!t.empty() && (t[0] == '[' || t[0] == '(')) t.erase(0, 1);
        while (!t.empty() && (t.back() == ',' || t.back() == ']' || t.back() == ')')) t.pop_back();
        if (t.size() >= 2 && t[0] == '-' && !isdigit((unsigned char)t[1])) flags.insert(t);
        t.clear();
    }
    return flags;
}

// Every flag of args (from index `first`): a word starting with '-', each followed by its value.
void check_flags(const Command& c, const std::set<std::string>& known, size_t first, const char* program) {
    for (size_t i = first; i < c.args.size(); i++) {
        std::string a = c.args[i];
        if (a.empty() || a[0] != '-') continue;
        if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) a = a.substr(0, a.find('='));
        else i++;  // its value
        EXPECT(known.count(a), "README.md:%d: %s has no flag %s (its --help does not list it): %s", c.line, program,
               a.c_str(), c.text.c_str());
    }
}

std::string joined(const std::vector<std::string>& words, size_t from = 0) {
    std::string s;
    for (size_t i = from; i < words.size(); i++) {
        bool quote = words[i].find_first_of(" ;&|*") != std::string::npos || words[i].empty();
        s += (s.empty() ? "" : " ") + (quote ? "'" + words[i] + "'" : words[i]);
    }
    return s;
}

bool has(const Command& c, const std::string& flag) {
    for (const std::string& a : c.args)
        if (a == flag) return true;
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s <repo root> <build/reproduce>\n", argv[0]);
        return 2;
    }
    const std::string repo = argv[1], cpu = repo + "/train_gpt2_zero_cpu";
    if (!file_exists(repo + "/data/mobydick/mobydick_train.bin")) {
        printf("readme_commands: no data/mobydick (make data): skipped\n");
        return TEST_SKIP;
    }
    std::vector<Command> cmds = readme_commands(repo + "/README.md");
    EXPECT(cmds.size() >= 10, "README.md holds %zu commands in ```sh blocks", cmds.size());
    const std::set<std::string> trainer_flags = help_flags(cpu);
    const std::set<std::string> reproduce_flags = help_flags(argv[2]);
    EXPECT(trainer_flags.count("--ranks") && trainer_flags.count("-b"), "the trainer's --help lists no flags");

    // one scratch folder per block, where a user's checkout would be: the trainer, build/prepare_data,
    // dev/ and the data linked in (the tokenizer file copied: prepare_data writes it), and a my_text.txt
    const std::string scratch = "readme_commands";
    run_command("rm -rf " + scratch);
    auto prepare = [&](const std::string& dir) {
        if (file_exists(dir)) return;
        make_dir(dir);
        run_command("cd " + dir + " && mkdir -p data build && ln -s " + repo + "/data/npm data/npm && ln -s " + repo +
                    "/data/mobydick data/mobydick && cp " + repo + "/data/gpt2_tokenizer.bin data/ && ln -s " + repo +
                    "/dev dev && ln -s " + repo + "/zero zero && ln -s " + cpu + " train_gpt2_zero_cpu && ln -s " + repo +
                    "/build/prepare_data build/prepare_data");
        FILE* t = open_file(dir + "/my_text.txt", "w");
        for (int i = 0; i < 400; i++)
            fprintf(t, "Day %d of the voyage: the wind held from the west, and the crew mended sail %d times.\n", i,
                    i % 7);
        fclose(t);
    };
    int ran = 0, checked = 0;
    for (const Command& c : cmds) {
        const std::string& prog = c.args[0];
        const std::string dir = scratch + "/block" + std::to_string(c.block);
        checked++;
        HostClock clock;
        if (prog == "make") {
            std::string targets = joined(c.args, 1);
            CommandResult r = run_command("env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -n -C " + repo + " " + targets +
                                          " > /dev/null");
            EXPECT(r.status == 0, "README.md:%d: make -n %s: exit %d\n%s", c.line, targets.c_str(), r.status,
                   r.output.c_str());
        } else if (prog == "./train_gpt2_zero" || prog == "./train_gpt2_zero_cpu") {
            check_flags(c, trainer_flags, 1, prog.c_str());
            bool launched = !c.launcher.empty() || !c.env.empty();
            if (prog == "./train_gpt2_zero_cpu" && !launched && !has(c, "--from_hf")) {
                prepare(dir);
                // the same command on a tiny model with GPT-2's vocabulary (a file model stays), at T 32; a
                // prediction on a shipped profile as it is (it runs nothing)
                std::string tail;
                bool shipped = c.text.find("--predict zero/perf/profiles/") != std::string::npos;
                for (size_t i = 1; i + 1 < c.args.size() && !shipped; i++)
                    if (c.args[i] == "-e" && !file_exists(dir + "/" + c.args[i + 1]) &&
                        c.args[i + 1].find('/') == std::string::npos)
                        tail += " -e L=4,H=4,C=64,V=50257,T=64";
                if (!has(c, "--sample") && !has(c, "--consolidate") && !has(c, "--export_hf") && !shipped)
                    tail += " -t 32 -v 0 -s 0" + std::string(has(c, "-d") ? " -d -1" : "");
                CommandResult r = run_command("cd " + dir + " && " + joined(c.args) + tail);
                ran++;
                EXPECT(r.status == 0, "README.md:%d: %s%s (in %s): exit %d\n%s", c.line, c.text.c_str(), tail.c_str(),
                       dir.c_str(), r.status, r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0).c_str());
            }
        } else if (prog == "build/prepare_data") {
            prepare(dir);
            CommandResult r = run_command("cd " + dir + " && " + joined(c.args));
            ran++;
            EXPECT(r.status == 0, "README.md:%d: %s (in %s): exit %d\n%s", c.line, c.text.c_str(), dir.c_str(), r.status,
                   r.output.c_str());
        } else if (prog == "build/reproduce") {
            check_flags(c, reproduce_flags, 1, "build/reproduce");
        } else if (prog == "sh" || prog == "bash") {
            std::string script = c.args.size() > 1 ? c.args[1] : "";
            EXPECT(file_exists(repo + "/" + script), "README.md:%d: no script %s", c.line, script.c_str());
            EXPECT(run_command(prog + " -n " + repo + "/" + script).status == 0, "README.md:%d: %s does not parse",
                   c.line, script.c_str());
        } else if (prog == "huggingface-cli" || prog == "ctest") {
            checked--;
            printf("README.md:%d: not checked (another program): %s\n", c.line, c.text.c_str());
        } else {
            checked--;
            EXPECT(false, "README.md:%d: no check for a command of %s (test/test_readme_commands.cpp): %s", c.line,
                   prog.c_str(), c.text.c_str());
        }
        printf("README.md:%d: %.1f s\n", c.line, clock.seconds());
    }
    printf("readme_commands: %d commands checked, %d of them run on a tiny model\n", checked, ran);
    EXPECT(ran >= 5, "only %d README commands ran", ran);
    return test_summary("readme_commands");
}
