// The folders' arrows run only downward: each folder's sources include only its own headers and
// those of the folders that docs/architecture.md's table lets it use, and a folder uses only the
// folders listed above it in that table. The table is the rule; this test reads it and the tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// One row of the folder table: a top-level folder and the Conveyor folders it may use.
struct folder_row {
  std::string name;
  /// Folders this one may include (`everything`: no rule, for programs and tests).
  std::set<std::string> uses;
  bool uses_everything = false;
};

/// An include of one folder's header by a file of another that the table does not allow.
struct violation {
  std::string file;
  int line = 0;
  std::string text;
};

std::vector<std::string> split_cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

/// The rows of the table under "## Where the code lives": first cell a folder in backticks
/// (`name/`), third cell the folders it uses in backticks, or "everything".
std::vector<folder_row> read_table(std::istream& doc) {
  std::vector<folder_row> rows;
  std::string line;
  bool in_section = false;
  const std::regex folder{R"(^\s*`([a-z_]+)/`\s*$)"};
  const std::regex used{R"(`([a-z_]+)/`)"};
  while (std::getline(doc, line)) {
    if (line.rfind("## ", 0) == 0) {
      in_section = line == "## Where the code lives";
      continue;
    }
    if (!in_section || line.rfind("|", 0) != 0) continue;
    const auto cells = split_cells(line);
    std::smatch m;
    if (cells.size() < 3 || !std::regex_match(cells[0], m, folder)) continue;
    folder_row row;
    row.name = m[1];
    row.uses_everything = cells[2].find("everything") != std::string::npos;
    for (std::sregex_iterator it{cells[2].begin(), cells[2].end(), used}, end; it != end; ++it)
      row.uses.insert((*it)[1]);
    rows.push_back(row);
  }
  return rows;
}

/// The uses that name a folder not listed above the row (an arrow upward or sideways), as
/// "row -> used".
std::vector<std::string> upward_arrows(const std::vector<folder_row>& rows) {
  std::vector<std::string> problems;
  std::set<std::string> above;
  for (const auto& row : rows) {
    for (const auto& u : row.uses)
      if (!above.count(u)) problems.push_back(row.name + " -> " + u);
    above.insert(row.name);
  }
  return problems;
}

/// The includes of `text` (a file of folder `owner`) that name a table folder `owner` may not use.
std::vector<violation> check_includes(const std::string& file, const std::string& owner,
                                      std::istream& text, const std::vector<folder_row>& rows) {
  std::map<std::string, const folder_row*> by_name;
  for (const auto& r : rows) by_name[r.name] = &r;
  std::vector<violation> found;
  const auto self = by_name.find(owner);
  if (self == by_name.end() || self->second->uses_everything) return found;
  const std::regex include{R"(^\s*#\s*include\s*"([a-z_]+)/[^"]*")"};
  std::string line;
  int number = 0;
  while (std::getline(text, line)) {
    ++number;
    std::smatch m;
    if (!std::regex_search(line, m, include)) continue;
    const std::string target = m[1];
    if (target == owner || !by_name.count(target)) continue;
    if (!self->second->uses.count(target)) found.push_back({file, number, line});
  }
  return found;
}

bool is_source(const fs::path& p) {
  const auto ext = p.extension().string();
  return ext == ".cpp" || ext == ".hpp" || ext == ".cu" || ext == ".h";
}

std::vector<folder_row> the_table() {
  std::ifstream doc{std::string{CONVEYOR_SOURCE_DIR} + "/docs/architecture.md"};
  EXPECT_TRUE(doc.good()) << "docs/architecture.md is not readable";
  return read_table(doc);
}

TEST(layers, the_table_lists_the_library_folders_in_order_with_arrows_only_downward) {
  const auto rows = the_table();
  ASSERT_FALSE(rows.empty()) << "no folder table under '## Where the code lives'";
  const auto problems = upward_arrows(rows);
  for (const auto& p : problems) ADD_FAILURE() << "a folder uses one listed below it: " << p;
}

TEST(layers, every_folder_with_sources_has_a_row_and_every_row_a_folder) {
  const auto rows = the_table();
  std::set<std::string> listed;
  for (const auto& r : rows) listed.insert(r.name);
  const fs::path root{CONVEYOR_SOURCE_DIR};
  for (const auto& entry : fs::directory_iterator{root}) {
    if (!entry.is_directory()) continue;
    const auto name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || name.rfind("build", 0) == 0) continue;
    if (!fs::exists(entry.path() / "CMakeLists.txt")) continue;
    EXPECT_TRUE(listed.count(name)) << "folder " << name << "/ builds code but has no row";
  }
  for (const auto& name : listed)
    EXPECT_TRUE(fs::is_directory(root / name))
        << "the table lists " << name << "/, not in the tree";
}

TEST(layers, each_folder_includes_only_the_folders_its_row_lets_it_use) {
  const auto rows = the_table();
  const fs::path root{CONVEYOR_SOURCE_DIR};
  int files = 0;
  for (const auto& row : rows) {
    if (row.uses_everything || !fs::is_directory(root / row.name)) continue;
    for (const auto& entry : fs::recursive_directory_iterator{root / row.name}) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      ++files;
      std::ifstream text{entry.path()};
      const auto rel = fs::relative(entry.path(), root).string();
      for (const auto& v : check_includes(rel, row.name, text, rows))
        ADD_FAILURE() << v.file << ":" << v.line << ": " << v.text << " (" << row.name
                      << "/ may use only what its row in docs/architecture.md lists)";
    }
  }
  EXPECT_GT(files, 100) << "the library folders hold too few sources: is the table read?";
}

// The checker itself, on a table and files made here: it must see what it is meant to see.
const char* const small_doc =
    "# x\n## Where the code lives\n"
    "| folder | what | uses | libraries |\n|---|---|---|---|\n"
    "| `common/` | errors | | |\n"
    "| `kernels/` | loops | | |\n"
    "| `model/` | networks | `common/`, `kernels/` | torch |\n"
    "| `apps/` | programs | everything | |\n"
    "## Another section\n| `late/` | not in the table | `model/` | |\n";

TEST(layers, the_checker_reads_rows_uses_and_everything) {
  std::istringstream doc{small_doc};
  const auto rows = read_table(doc);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[2].name, "model");
  EXPECT_EQ(rows[2].uses, (std::set<std::string>{"common", "kernels"}));
  EXPECT_TRUE(rows[3].uses_everything);
  EXPECT_TRUE(upward_arrows(rows).empty());
}

TEST(layers, the_checker_finds_an_upward_arrow_and_a_forbidden_include) {
  std::istringstream doc{small_doc};
  const auto rows = read_table(doc);
  auto upward = rows;
  upward[1].uses.insert("model");  // kernels -> model: model is listed below kernels
  EXPECT_EQ(upward_arrows(upward), (std::vector<std::string>{"kernels -> model"}));

  std::istringstream file{
      "#include <vector>\n#include \"kernels/a.hpp\"\n#include \"model/b.hpp\"\n"
      "#include \"unknown/c.hpp\"\n"};
  const auto found = check_includes("kernels/a.cpp", "kernels", file, rows);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].line, 3);
  std::istringstream allowed{"#include \"kernels/a.hpp\"\n#include \"common/e.hpp\"\n"};
  EXPECT_TRUE(check_includes("model/m.cpp", "model", allowed, rows).empty());
  std::istringstream anything{"#include \"model/b.hpp\"\n"};
  EXPECT_TRUE(check_includes("apps/main.cpp", "apps", anything, rows).empty());
}

}  // namespace
