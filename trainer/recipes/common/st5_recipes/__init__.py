"""st5's training recipes' shared helpers, one module per job. The recipes under trainer/recipes/
import them (`from st5_recipes.genre import embed`) and run them (`python -m st5_recipes.genre`)
once the package is installed: `pip install --no-deps -e trainer/recipes/common`.

- `student_init`: a T5 student at step 0, its token embeddings from the teacher;
- `teacher`: the distillation sentences (deduplicated, split) and the teacher's vectors;
- `teachers`: the teachers (all-MiniLM-L6-v2, all-mpnet-base-v2) as offline directories;
- `nli`: NLI triplets with hard negatives for the contrastive stage;
- `genre`: STS-B dev by genre and SICK-R train + trial, through the `st5` CLI;
- `grow`: a student grown to more layers, the new ones the identity;
- `fit`: how closely a student fits its distillation targets, and the fit / held-out split.
"""
