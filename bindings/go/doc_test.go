package metrale_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// undocumented lists the exported identifiers of the Go files under root
// (tests excluded) that have no doc comment: functions, methods of exported
// types, types, constants, variables and the fields of exported structs. A
// constant or variable in a group may rely on the group's comment; a field
// may use a trailing comment; fields named together share one.
func undocumented(t *testing.T, root string) []string {
	t.Helper()
	var missing []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		miss := func(pos token.Pos, what string) {
			missing = append(missing, fset.Position(pos).String()+": "+what)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				if d.Recv != nil && !exportedRecv(d.Recv.List[0].Type) {
					continue
				}
				miss(d.Pos(), "func "+d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if s.Doc == nil && d.Doc == nil {
							miss(s.Pos(), "type "+s.Name.Name)
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									if n.IsExported() && fld.Doc == nil && fld.Comment == nil {
										miss(n.Pos(), "field "+s.Name.Name+"."+n.Name)
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
								miss(n.Pos(), "value "+n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return missing
}

func exportedRecv(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.StarExpr:
		return exportedRecv(x.X)
	case *ast.IndexExpr:
		return exportedRecv(x.X)
	case *ast.Ident:
		return x.IsExported()
	}
	return true
}

// Every exported identifier of the module has a doc comment.
func TestEveryExportedIdentifierIsDocumented(t *testing.T) {
	for _, m := range undocumented(t, ".") {
		t.Errorf("no doc comment: %s", m)
	}
}

// The check itself finds what it is meant to find.
func TestTheDocCheckFindsMissingDocs(t *testing.T) {
	dir := t.TempDir()
	src := `package p

// Documented is fine.
func Documented() {}

func Bare() {}

type T struct {
	Field int
	Noted int // a trailing comment counts
}

func (T) Method() {}

func (t unexported) Hidden() {}

type unexported struct{}

// Grouped constants share this comment.
const (
	A = 1
	B = 2
)

var V = 3
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(undocumented(t, dir), "\n")
	for _, want := range []string{"func Bare", "type T", "field T.Field", "func Method", "value V"} {
		if !strings.Contains(got, want) {
			t.Errorf("the check missed %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"Documented", "Noted", "Hidden", "value A", "value B"} {
		if strings.Contains(got, not) {
			t.Errorf("the check flagged %q:\n%s", not, got)
		}
	}
}
